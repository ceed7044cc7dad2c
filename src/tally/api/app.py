"""create_app(settings): the ASGI application, with its routers, middleware and errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from tally import __version__
from tally.api import health
from tally.api.compression import NegotiatedGZipMiddleware
from tally.api.cors import AccountCorsMiddleware
from tally.api.errors import install_error_handlers
from tally.api.queries.runner import query_runner_for
from tally.api.v1 import data
from tally.api.v2 import files, reconciliations, sources, transformations, webhooks
from tally.core.collector import settle_garbage_collector
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings


def create_app(settings: Settings, runtime: Runtime | None = None) -> FastAPI:
    runtime = runtime or build_runtime(settings)
    queries = query_runner_for(settings, runtime)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await queries.start()
        settle_garbage_collector()
        yield
        queries.close()
        runtime.close()

    app = FastAPI(
        title="tally",
        version=__version__,
        description="tally's Data API (/api/v1, read-only), ingestion API and reconciliation "
        "API (/api/v2).",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.queries = queries
    app.add_middleware(
        NegotiatedGZipMiddleware,
        minimum_size=settings.gzip_min_bytes,
        compresslevel=settings.gzip_level,
    )
    app.add_middleware(AccountCorsMiddleware)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(data.router)
    app.include_router(webhooks.router)
    app.include_router(files.router)
    app.include_router(sources.router)
    app.include_router(reconciliations.router)
    app.include_router(transformations.router)
    return app
