"""create_app(settings): the ASGI application, with its routers, middleware and errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline

from tally import __version__
from tally.api import health
from tally.api.compression import NegotiatedGZipMiddleware
from tally.api.cors import AccountCorsMiddleware
from tally.api.errors import install_error_handlers
from tally.api.queries.runner import query_runner_for
from tally.api.v1 import data
from tally.api.v2 import (
    callback_deliveries,
    files,
    reconciliations,
    resources,
    sources,
    transformations,
    webhooks,
)
from tally.api.v2.bodies import request_components
from tally.console.app import install_console
from tally.processes.collector import settle_garbage_collector
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings


def create_app(settings: Settings, runtime: Runtime | None = None) -> FastAPI:
    runtime = runtime or build_runtime(settings)
    runtime.build_every_service()  # before the lifespan settles the collector
    queries = query_runner_for(settings, runtime)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await queries.start()
        settle_garbage_collector()
        yield
        queries.close()
        runtime.close()

    # Swagger UI's script, style sheet and icon come from the fastapi-offline package and
    # are served under static_url: the docs page works offline and asks no CDN.
    app = FastAPIOffline(
        static_url="/api/v1/docs/static",
        # and no spec sent to swagger.io's online validator either
        swagger_ui_parameters={"validatorUrl": None},
        title="tally",
        version=__version__,
        description="tally's Data API (/api/v1, read-only), ingestion API and reconciliation "
        "API (/api/v2).",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
        lifespan=lifespan,
        # operationIds are the routes' function names: a generated client's functions
        # are `get_transformation`, not `get_transformation_api_v2_transformations_..._get`
        generate_unique_id_function=_operation_id,
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
    app.include_router(callback_deliveries.router)
    app.include_router(sources.router)
    app.include_router(reconciliations.router)
    app.include_router(transformations.router)
    app.include_router(resources.router)
    install_console(app, settings)  # after the error handlers: it keeps them for the API
    _document_request_bodies(app)
    return app


def _operation_id(route: APIRoute) -> str:
    return route.name


def _document_request_bodies(app: FastAPI) -> None:
    """Add the bodies read by hand (bodies.json_request_body) to the document's components.

    A component FastAPI registered already (a response's model) is the same model, so
    the request's validation schema may stand in for it.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            document.setdefault("components", {}).setdefault("schemas", {}).update(
                request_components()
            )
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
