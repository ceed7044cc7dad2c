"""`tally serve`: the API and, in the same process, a worker: the whole service."""

from __future__ import annotations

import importlib
import os
import signal
from typing import Annotated

import typer
import uvicorn

from tally.cli.demo import create_demo
from tally.cli.output import emit
from tally.runtime import Runtime, build_runtime
from tally.settings import load_settings
from tally.worker.runner import Worker

ASGI_MODULE = "tally.api.asgi"


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
    settings = load_settings()
    runtime = build_runtime(settings)  # applies migrations once, before any process starts
    if demo:
        _create_demo(runtime, f"http://{host}:{port}")
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
    try:
        if settings.serve_worker:
            background = Worker(
                runtime,
                concurrency=settings.worker_concurrency,
                poll_seconds=settings.worker_poll_seconds,
            )
            background.start()
        typer.echo(f"tally {runtime.backend_name} listening on http://{host}:{port}", err=True)
        processes = workers or settings.web_concurrency
        # The API processes read their settings from the environment: they share the
        # machine's CPUs among their query processes by this count.
        os.environ["TALLY_WEB_CONCURRENCY"] = str(processes)
        uvicorn.run(
            f"{ASGI_MODULE}:app_factory",
            factory=True,
            host=host,
            port=port,
            workers=processes,
            log_level="warning",
            access_log=False,
        )
    finally:
        if background is not None:
            background.stop()  # finish the jobs in hand
        runtime.close()


def _exit_cleanly(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _create_demo(runtime: Runtime, base_url: str) -> None:
    made = create_demo(runtime)
    env_file = runtime.write_home_file("demo.env", made.shell_exports(base_url))
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
        }
    )
