"""CORS for the ingestion API, per account: headers only for an account's own origins.

Starlette's CORSMiddleware takes one static list; tally's origins live in the database,
per account (`tally admin create-account --allowed-origin`). A preflight carries no
account header, so it is answered for the origins of any account; the real request
then gets CORS headers only when its origin belongs to the account it names.

A plain ASGI middleware rather than `@app.middleware("http")`: that wrapper streams
every response body through an in-memory channel, which cost the Data API more CPU per
request than its own query. Requests outside /api/v2, or without Origin, pass untouched.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tally.api.errors import V2_PREFIX
from tally.services.admin import AdminService

ALLOWED_METHODS = "GET, POST, PUT, DELETE, OPTIONS"  # PUT, DELETE: reconciliations
ALLOWED_HEADERS = "content-type, x-api-key, x-svc-workspace, x-svc-account, idempotency-key"
PREFLIGHT_MAX_AGE_SECONDS = "600"


class AccountCorsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(V2_PREFIX):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        admin: AdminService = scope["app"].state.runtime.admin
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            response = await _preflight_response(admin, origin)
            await response(scope, receive, send)
            return
        account = headers.get("x-svc-account", "")
        allowed = (
            account.isascii()
            and account.isdigit()
            and origin in await run_in_threadpool(admin.allowed_origins, int(account))
        )

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                response_headers.add_vary_header("Origin")
                if allowed:
                    response_headers["Access-Control-Allow-Origin"] = origin
            await send(message)

        await self.app(scope, receive, send_with_cors)


async def _preflight_response(admin: AdminService, origin: str) -> Response:
    response = Response(status_code=204, headers={"Vary": "Origin"})
    if origin in await run_in_threadpool(admin.allowed_origins, None):
        response.headers.update(
            {
                "Access-Control-Allow-Origin": origin,
                "Access-Control-Allow-Methods": ALLOWED_METHODS,
                "Access-Control-Allow-Headers": ALLOWED_HEADERS,
                "Access-Control-Max-Age": PREFLIGHT_MAX_AGE_SECONDS,
            }
        )
    return response
