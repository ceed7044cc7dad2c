"""CORS for the ingestion API, per account: headers only for an account's own origins.

Starlette's CORSMiddleware takes one static list; tally's origins live in the database,
per account (`tally admin create-account --allowed-origin`). A preflight carries no
account header, so it is answered for the origins of any account; the real request
then gets CORS headers only when its origin belongs to the account it names.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from tally.api.errors import V2_PREFIX
from tally.services.admin import allowed_origins

ALLOWED_METHODS = "GET, POST, OPTIONS"
ALLOWED_HEADERS = "content-type, x-api-key, x-svc-workspace, x-svc-account, idempotency-key"
PREFLIGHT_MAX_AGE_SECONDS = "600"


async def cors_middleware(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    origin = request.headers.get("origin")
    if origin is None or not request.url.path.startswith(V2_PREFIX):
        return await call_next(request)
    engine = request.app.state.runtime.engine
    if request.method == "OPTIONS" and "access-control-request-method" in request.headers:
        response = Response(status_code=204, headers={"Vary": "Origin"})
        if origin in await run_in_threadpool(allowed_origins, engine, None):
            response.headers.update(
                {
                    "Access-Control-Allow-Origin": origin,
                    "Access-Control-Allow-Methods": ALLOWED_METHODS,
                    "Access-Control-Allow-Headers": ALLOWED_HEADERS,
                    "Access-Control-Max-Age": PREFLIGHT_MAX_AGE_SECONDS,
                }
            )
        return response
    response = await call_next(request)
    response.headers.append("Vary", "Origin")
    account = request.headers.get("x-svc-account", "")
    if account.isdigit() and origin in await run_in_threadpool(
        allowed_origins, engine, int(account)
    ):
        response.headers["Access-Control-Allow-Origin"] = origin
    return response
