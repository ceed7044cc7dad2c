"""Real HTTP servers on loopback for end-to-end tests.

Network code has to be tested against a real socket and a real HTTP stack: timeouts,
redirects, chunked bodies and dropped connections are exactly what mocks get wrong.

* `serve_app(app)` runs any ASGI app under uvicorn on 127.0.0.1 (a free port, a
  background thread) and yields its base URL; optional TLS with `tls_files(...)`.
* `RequestLog` + `record_requests(app, log)` remember every request an app received
  (method, path, query, headers, body) and what became of it (the answer's status and
  size, the client leaving), so a test can assert what reached the server, or that
  nothing did, or that a client gave up.
* `file_server_app(files)` is a Starlette app with the behaviours a downloader must
  survive: credentials of three kinds, redirect chains, slow and hanging servers,
  error statuses, oversized files. Its routes are listed in its docstring.

Everything binds to 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import mimetypes
import secrets
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from support.waiting import eventually

LOOPBACK = "127.0.0.1"
_Guard = Callable[[Request], bool]
_Endpoint = Callable[[Request], Awaitable[Response]]
_START_TIMEOUT_SECONDS = 60.0  # an app starting query processes, on a loaded machine
_STOP_TIMEOUT_SECONDS = 10.0


# --- running an app -----------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on now (for a server another process starts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_app(
    app: ASGIApp,
    *,
    tls: tuple[Path, Path] | None = None,
    lifespan: bool = False,
    access_log: bool = False,
) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (free port) in a thread; yield e.g. ``http://127.0.0.1:PORT``.

    The socket is bound before the server starts, so the port cannot be taken by another
    test in between; the URL is yielded only once the server accepts connections. `tls`
    is ``(certificate, key)`` PEM files (see `tls_files`) and makes the URL ``https``.
    `lifespan` runs the app's start-up and shut-down (tally's closes its runtime); most
    tests leave it off and close the runtime they built themselves. `access_log` turns
    uvicorn's access log on (one line per request, at INFO on `uvicorn.access`).
    On exit the server stops (in-flight requests get 2 s) and the thread is joined.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((LOOPBACK, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=access_log,
        lifespan="on" if lifespan else "off",
        loop="asyncio",
        http="h11",
        timeout_graceful_shutdown=2,
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"uvicorn-{port}", daemon=True
    )
    thread.start()
    try:
        _wait_until_serving(server, thread, port)
        yield f"{'https' if tls else 'http'}://{LOOPBACK}:{port}"
    finally:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_SECONDS)
        sock.close()
        if thread.is_alive():
            raise RuntimeError(f"the test server on port {port} did not stop")


def _wait_until_serving(server: uvicorn.Server, thread: threading.Thread, port: int) -> None:
    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError(f"the test server on port {port} stopped while starting")
        return bool(server.started)

    eventually(
        started,
        timeout=_START_TIMEOUT_SECONDS,
        what=f"the test server on port {port}",
        interval=0.01,
    )
    with socket.create_connection((LOOPBACK, port), timeout=_START_TIMEOUT_SECONDS):
        pass


def tls_files(directory: Path, hostname: str = "localhost") -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for `hostname` (DNS name only, no IP).

    Returns ``(ca_certificate, server_certificate, server_key)`` PEM paths; pass the last
    two to `serve_app(tls=...)` and trust the first with `ssl.create_default_context(cafile=)`.
    """
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tally test CA")])
    ca = (
        _certificate(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    leaf = (
        _certificate(server_name, ca_name, key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / "ca.pem", directory / "server.pem", directory / "server-key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def _certificate(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, now: dt.datetime
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


# --- what reached the server --------------------------------------------------------------


@dataclass
class SeenRequest:
    """One request as the server received it, and what became of it. Header names are
    lower-case. `status` and `body_bytes_sent` describe the answer sent while the client
    was there (`status` None: none started). `client_left_after` stays None until the
    app sees the client go (an ASGI ``http.disconnect`` while it still works on the
    answer), then holds how many body bytes had been sent by then."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytearray = field(default_factory=bytearray)
    status: int | None = None
    body_bytes_sent: int = 0
    client_left_after: int | None = None


class RequestLog:
    """Thread-safe record of the requests an app received (written by the server thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[SeenRequest] = []

    def add(self, request: SeenRequest) -> None:
        with self._lock:
            self._seen.append(request)

    @property
    def requests(self) -> list[SeenRequest]:
        with self._lock:
            return list(self._seen)

    @property
    def paths(self) -> list[str]:
        return [seen.path for seen in self.requests]

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


def record_requests(app: ASGIApp, log: RequestLog) -> ASGIApp:
    """Wrap any ASGI app so each HTTP request (its body as read, the answer's status and
    size as sent, and the client leaving) lands in `log`."""

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        seen = SeenRequest(
            scope["method"], scope["path"], scope["query_string"].decode("latin-1"), headers
        )
        log.add(seen)

        async def receive_and_record() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen.body.extend(message.get("body", b""))
            elif message["type"] == "http.disconnect" and seen.client_left_after is None:
                seen.client_left_after = seen.body_bytes_sent
            return message

        async def send_and_record(message: Message) -> None:
            if seen.client_left_after is not None:
                pass  # sent into the void: the client is gone
            elif message["type"] == "http.response.start":
                seen.status = message["status"]
            elif message["type"] == "http.response.body":
                seen.body_bytes_sent += len(message.get("body", b""))
            await send(message)

        await app(scope, receive_and_record, send_and_record)

    return recording


# --- a file server with every misbehaviour ------------------------------------------------


def pattern_bytes(size: int) -> bytes:
    """`size` deterministic, non-repeating-looking bytes (for hashes of large bodies)."""
    return bytes(i * 7 % 251 for i in range(size))


@dataclass(frozen=True)
class ServerSecrets:
    """The credentials the protected routes of `file_server_app` accept."""

    username: str = "alice"
    password: str = "s3cret-pass"
    api_key: str = "key-0123456789"
    token: str = "tok-abcdefghij"


def file_server_app(
    files: dict[str, bytes],
    *,
    log: RequestLog | None = None,
    accepted: ServerSecrets = ServerSecrets(),
) -> ASGIApp:
    """A Starlette app serving `files` by name, with the routes a downloader meets.

    GET routes (``{name}`` is a key of `files`; unknown names answer 404):

    ``/files/{name}``                 the file, with Content-Length and a guessed type
    ``/basic/files/{name}``           the same behind HTTP Basic (401 otherwise)
    ``/api-key/files/{name}``         the same behind ``X-API-Key`` (401 otherwise)
    ``/bearer/files/{name}``          the same behind ``Authorization: Bearer`` (401)
    ``/redirect/{hops}/{path}``       `hops` relative redirects, ending at ``/{path}``
                                      (``?status=307`` picks the redirect status)
    ``/redirect-to?url=...``          one absolute redirect to any URL (another port, a
                                      refused address, another scheme)
    ``/slow/{name}?chunk=&delay=``    the file in `chunk`-byte pieces, `delay` s apart
    ``/hang?seconds=``                no headers for `seconds` (or until the client leaves)
    ``/status/{code}?retry_after=``   an empty answer with that status (and Retry-After)
    ``/announce/{length}``            announces Content-Length `length` and trickles bytes
    ``/chunked/{size}``               `size` bytes of `pattern_bytes`, chunked, no length

    Every request is recorded in `log` when one is given.
    """
    routes = [
        Route("/files/{name}", _file_route(files, None)),
        Route("/basic/files/{name}", _file_route(files, _basic_ok(accepted))),
        Route("/api-key/files/{name}", _file_route(files, _api_key_ok(accepted))),
        Route("/bearer/files/{name}", _file_route(files, _bearer_ok(accepted))),
        Route("/redirect/{hops:int}/{rest:path}", _redirect_chain),
        Route("/redirect-to", _redirect_to),
        Route("/slow/{name}", _slow_route(files)),
        Route("/hang", _hang),
        Route("/status/{code:int}", _status),
        Route("/announce/{length:int}", _announce),
        Route("/chunked/{size:int}", _chunked),
    ]
    app: ASGIApp = Starlette(routes=routes)
    return record_requests(app, log) if log is not None else app


def _file_route(files: dict[str, bytes], allowed: _Guard | None) -> _Endpoint:
    async def endpoint(request: Request) -> Response:
        if allowed is not None and not allowed(request):
            return Response(b"unauthorized", 401, {"WWW-Authenticate": 'Basic realm="test"'})
        name = request.path_params["name"]
        if name not in files:
            return Response(b"not found", 404)
        return Response(files[name], media_type=_media_type(name))

    return endpoint


def _media_type(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _basic_ok(accepted: ServerSecrets) -> _Guard:
    expected = base64.b64encode(f"{accepted.username}:{accepted.password}".encode()).decode()
    return lambda request: _same(request.headers.get("authorization"), f"Basic {expected}")


def _api_key_ok(accepted: ServerSecrets) -> _Guard:
    return lambda request: _same(request.headers.get("x-api-key"), accepted.api_key)


def _bearer_ok(accepted: ServerSecrets) -> _Guard:
    return lambda request: _same(request.headers.get("authorization"), f"Bearer {accepted.token}")


def _same(given: str | None, expected: str) -> bool:
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())


async def _redirect_chain(request: Request) -> Response:
    hops: int = request.path_params["hops"]
    rest: str = request.path_params["rest"]
    status = int(request.query_params.get("status", "302"))
    target = f"/redirect/{hops - 1}/{rest}" if hops > 1 else f"/{rest}"
    if request.url.query:
        target += f"?{request.url.query}"
    return RedirectResponse(target, status_code=status)


async def _redirect_to(request: Request) -> Response:
    status = int(request.query_params.get("status", "302"))
    return RedirectResponse(request.query_params["url"], status_code=status)


def _slow_route(files: dict[str, bytes]) -> _Endpoint:
    async def endpoint(request: Request) -> Response:
        body = files[request.path_params["name"]]
        chunk = int(request.query_params.get("chunk", "1"))
        delay = float(request.query_params.get("delay", "0.5"))

        async def trickle() -> AsyncIterator[bytes]:
            for start in range(0, len(body), chunk):
                yield body[start : start + chunk]
                await anyio.sleep(delay)

        headers = {"Content-Length": str(len(body))}
        return StreamingResponse(trickle(), headers=headers, media_type=_media_type("x.bin"))

    return endpoint


async def _hang(request: Request) -> Response:
    with anyio.move_on_after(float(request.query_params.get("seconds", "30"))):
        # The request body is empty, so the next message is the client leaving.
        while (await request.receive())["type"] != "http.disconnect":
            continue
    return Response(b"too late")


async def _status(request: Request) -> Response:
    retry_after = request.query_params.get("retry_after")
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Response(b"", request.path_params["code"], headers)


async def _announce(request: Request) -> Response:
    length: int = request.path_params["length"]

    async def trickle() -> AsyncIterator[bytes]:
        # Never reaches `length`: a client must give up on the header alone; the
        # stream is cancelled when it leaves.
        for _ in range(600):
            yield b"x"
            await anyio.sleep(0.05)

    return StreamingResponse(trickle(), headers={"Content-Length": str(length)})


async def _chunked(request: Request) -> Response:
    body = pattern_bytes(request.path_params["size"])

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 16 * 1024):
            yield body[start : start + 16 * 1024]

    return StreamingResponse(pieces(), media_type="application/octet-stream")
