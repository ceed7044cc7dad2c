"""`ConsoleGuard`: around every console response (paths under /console/, and `/`), the
security headers; before every state-changing console request, the cross-origin check
(decision 0026). A pure ASGI middleware: the Data API's requests pass it at the cost of
one prefix test.

The check, after Go 1.25's `CrossOriginProtection`: a POST (any method but GET, HEAD,
OPTIONS) is refused with 403 unless its `Sec-Fetch-Site` is `same-origin` or `none`;
a browser too old to send that header must send an `Origin` equal to the console's own
(the request's scheme and Host, or TALLY_PUBLIC_URL's). A request with neither header is
refused too: every browser sends one on a POST, and the console serves browsers only.

A console form's body (anything posted but an upload, whose size TALLY_MAX_FILE_BYTES
bounds) is at most FORM_MAX_BYTES: larger is a 413 before it is read whole, since the
form parser would hold all of it in memory (the headers are no proof of a browser).
"""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
UPLOAD_SUFFIX = "/upload"  # /console/sources/{id}/upload: bounded by TALLY_MAX_FILE_BYTES
# No script at all for now (nothing inline, nothing from elsewhere); styles from our own
# static files; forms post only to us; no page may be framed (click-jacking).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
)
# A definition's JSON (the API takes 1 MiB) as a form field, percent-encoded at worst.
FORM_MAX_BYTES = 4 * 1024 * 1024
TOO_LARGE_PAGE = (
    b"<!doctype html><html lang=en><meta charset=utf-8><title>Too large - tally</title>"
    b"<main><h1>Too large</h1><p>This form sent more than the console reads"
    b" (4 MiB), so nothing was done. Go back and send less.</p></main></html>"
)
REFUSED_PAGE = (
    b"<!doctype html><html lang=en><meta charset=utf-8><title>Refused - tally</title>"
    b"<main><h1>Refused</h1><p>This request came from another site, so it was refused."
    b" Go back to the console and try again from there.</p></main></html>"
)


def is_console_path(path: str) -> bool:
    return path == "/" or path == "/console" or path.startswith("/console/")


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port
    default = {"http": 80, "https": 443}.get(parts.scheme)
    host = (parts.hostname or "").lower()
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default else "")


def is_same_origin(scope: Scope, headers: Headers, public_url: str) -> bool:
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None or origin == "null":
        return False
    own = {origin_of(public_url)}
    if (host := headers.get("host")) is not None:
        own.add(origin_of(f"{scope.get('scheme', 'http')}://{host}"))
    return origin_of(origin) in own


class ConsoleGuard:
    def __init__(self, app: ASGIApp, *, public_url: str) -> None:
        self.app = app
        self.public_url = public_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_console_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS:
            headers = Headers(scope=scope)
            if not is_same_origin(scope, headers, self.public_url):
                await _answer(send, 403, REFUSED_PAGE)
                return
            if not scope["path"].endswith(UPLOAD_SUFFIX):
                await self._bounded(scope, receive, send, headers)
                return
        await self.app(scope, receive, _with_headers(send))

    async def _bounded(self, scope: Scope, receive: Receive, send: Send, headers: Headers) -> None:
        """The app, reading a body of at most FORM_MAX_BYTES (else a 413, unless the
        app has answered already)."""
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > FORM_MAX_BYTES:
            await _answer(send, 413, TOO_LARGE_PAGE)
            return
        seen = 0
        too_large = started = False

        async def counted() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > FORM_MAX_BYTES and not started:
                    too_large = True
                    raise _BodyTooLargeError()
            return message

        async def noted(message: Message) -> None:
            nonlocal started
            if too_large:  # the app's answer to a body cut short (FastAPI makes it a 400)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        with contextlib.suppress(_BodyTooLargeError):  # (when the app lets it through)
            await self.app(scope, counted, _with_headers(noted))
        if too_large:
            await _answer(send, 413, TOO_LARGE_PAGE)


class _BodyTooLargeError(Exception):
    """Raised from `receive` once a form's body passes FORM_MAX_BYTES."""


def _with_headers(send: Send) -> Send:
    """`send`, adding the security headers to the response (no-store on a page)."""

    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            for name, value in SECURITY_HEADERS:
                headers.raw.append((name, value))
            if headers.get("content-type", "").startswith("text/html"):
                headers["cache-control"] = "no-store"  # a page holds the workspace's data
        await send(message)

    return send_with_headers


async def _answer(send: Send, status: int, page: bytes) -> None:
    """A refusal of the guard's own, before the app reads anything."""
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(page)).encode()),
        (b"cache-control", b"no-store"),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": page})
