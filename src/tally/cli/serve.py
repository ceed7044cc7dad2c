"""`tally serve`: the API and, in the same process, a worker: the whole service."""

from __future__ import annotations

import http.client
import importlib
import os
import signal
import socket
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from tally.cli.output import emit, reported_errors
from tally.core.errors import ListenError

if TYPE_CHECKING:
    from tally.runtime import Runtime

ASGI_MODULE = "tally.api.asgi"
_SELF_CHECK_SECONDS = 0.05  # between the self-check's tries of GET /health
_SELF_CHECK_TIMEOUT_SECONDS = 5.0


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Create a demo workspace, key, sources, reconciliation and transformation; "
            "print them and write TALLY_HOME/demo.env for the README's curl examples.",
        ),
    ] = False,
    workers: Annotated[
        int | None, typer.Option(help="API processes (env: TALLY_WEB_CONCURRENCY).")
    ] = None,
) -> None:
    """Run the service: the API, and a worker unless TALLY_SERVE_WORKER=false."""
    # Bound before the slow start-up (migrations, imports): a taken port fails at once.
    with reported_errors():
        sock = _bind(host, port)
    try:
        _serve(sock, host, demo, workers)
    finally:
        sock.close()


def _serve(sock: socket.socket, host: str, demo: bool, workers: int | None) -> None:
    # Imported here, not with the module: every other command (`tally admin ...`) would
    # pay for uvicorn and the worker (whose handlers import every service) at its start,
    # and `tally --help` for the runtime's too (issue #36).
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from tally.runtime import build_runtime
    from tally.settings import load_settings
    from tally.worker.runner import Worker

    settings = load_settings()
    runtime = build_runtime(settings)  # applies migrations once, before any process starts
    base_url = _url(host, sock.getsockname()[1])
    if demo:
        _create_demo(runtime, base_url)
    background = None
    # Import the app's module (FastAPI, pydantic models: seconds on a busy machine)
    # before the worker starts and the handlers below are set: uvicorn imports it
    # before it catches signals itself, and a SystemExit raised inside pydantic's
    # model building comes out as a SchemaError (exit 1, a traceback) instead of a
    # clean stop. A SIGTERM now still stops the process: no worker has started.
    importlib.import_module(ASGI_MODULE)
    # uvicorn re-raises the signal that stopped it once it has shut down, with the
    # handlers it found; these turn it into SystemExit, so the `finally` below stops
    # the worker (its file finished or released) before the process exits, with 0.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_cleanly)
    stopped = threading.Event()
    try:
        if settings.serve_worker:
            background = Worker(
                runtime,
                concurrency=settings.worker_concurrency,
                poll_seconds=settings.worker_poll_seconds,
            )
            background.start()
        processes = workers or settings.web_concurrency
        # The API processes read their settings from the environment: they share the
        # machine's CPUs among their query processes by this count.
        os.environ["TALLY_WEB_CONCURRENCY"] = str(processes)
        config = uvicorn.Config(
            f"{ASGI_MODULE}:app_factory",
            factory=True,
            workers=processes,
            log_level="warning",
            access_log=False,
        )
        listening = f"tally {runtime.backend_name} listening on {base_url}"
        threading.Thread(
            target=_say_when_answering,
            args=(sock, listening, stopped),
            name="serve-self-check",
            daemon=True,
        ).start()
        if processes > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        stopped.set()
        if background is not None:
            background.stop()  # finish the jobs in hand
        runtime.close()


def _bind(host: str, port: int) -> socket.socket:
    """The listening address, bound (uvicorn listens on it once the app has started)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:  # taken, not an address of this machine, a privileged port
        sock.close()
        reason = exc.strerror or str(exc)
        raise ListenError(f"cannot listen on {_url(host, port)}: {reason}") from None
    sock.set_inheritable(True)  # the API processes of TALLY_WEB_CONCURRENCY > 1 share it
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _say_when_answering(sock: socket.socket, message: str, stopped: threading.Event) -> None:
    """Print `message` once GET /health answers on the socket's address: the server has
    started and takes requests (until then a connection is refused)."""
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104 - any address
    while not stopped.wait(_SELF_CHECK_SECONDS):
        if _answers(host, port):
            typer.echo(message, err=True)
            return


def _answers(host: str, port: int) -> bool:
    connection = http.client.HTTPConnection(host, port, timeout=_SELF_CHECK_TIMEOUT_SECONDS)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status == 200
    except OSError:  # refused: not started yet
        return False
    finally:
        connection.close()


def _exit_cleanly(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _create_demo(runtime: Runtime, base_url: str) -> None:
    from tally.cli.demo import create_demo  # `tally serve --demo` alone (issue #36)
    from tally.services.users import INVITE_PATH

    made = create_demo(runtime)
    env_file = runtime.write_home_file("demo.env", made.shell_exports(base_url))
    # A console admin of the demo's workspace (a name of its own: a second demo makes
    # another), invited at the address this server listens on.
    invited = runtime.users.create_user(
        workspace_id=made.workspace_id, name=f"demo-{made.workspace_id}", role="admin"
    )
    url = f"{base_url}/api/v1/resources/{made.resource_id}/data"
    emit(
        {
            "account_id": made.account_id,
            "workspace_id": made.workspace_id,
            "key": made.key,
            "resource_id": made.resource_id,
            "env_file": str(env_file),
            "curl": f"curl -s -H 'X-API-Key: {made.key}' -H 'workspace_id: "
            f"{made.workspace_id}' '{url}?status=settled&ordering=-amount&page_size=5'",
            "console_user": invited.user.name,
            "console_invite_url": f"{base_url}{INVITE_PATH}{invited.token}",
        }
    )
