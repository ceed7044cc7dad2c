"""`ConsoleGuard`: around every console response (paths under /console/, and `/`), the
security headers; before every state-changing console request, the cross-origin check
(decision 0026). A pure ASGI middleware: the Data API's requests pass it at the cost of
one prefix test.

The check, after Go 1.25's `CrossOriginProtection`: a POST (any method but GET, HEAD,
OPTIONS) is refused with 403 unless its `Sec-Fetch-Site` is `same-origin` or `none`;
a browser too old to send that header must send an `Origin` equal to the console's own
(the request's scheme and Host, or TALLY_PUBLIC_URL's). A request with neither header is
refused too: every browser sends one on a POST, and the console serves browsers only.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
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
        if scope["method"] not in SAFE_METHODS and not is_same_origin(
            scope, Headers(scope=scope), self.public_url
        ):
            await self._refuse(send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS:
                    headers.raw.append((name, value))
                if headers.get("content-type", "").startswith("text/html"):
                    headers["cache-control"] = "no-store"  # a page holds the workspace's data
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _refuse(self, send: Send) -> None:
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(REFUSED_PAGE)).encode()),
            (b"cache-control", b"no-store"),
            *SECURITY_HEADERS,
        ]
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": REFUSED_PAGE})
