"""`install_console(app, settings)`: the console's routes, static files, error pages and
guard, added to the API's app (one process serves both)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from tally.console import (
    exceptions_export,
    overview,
    people,
    reconciliation,
    resource_table,
    sign_in,
    source,
    source_actions,
    transformation_new,
    transformations,
    workbench_exceptions,
    workbench_exceptions_actions,
    workbench_history,
    workbench_matches,
    workbench_resolved,
    workbench_suggestions,
)
from tally.console.auth import ForbiddenError, SignInRequiredError, optional_user
from tally.console.guard import ConsoleGuard, is_console_path
from tally.console.pages import STATIC, not_found_page, render
from tally.settings import Settings

STATIC_PATH = "/console/static"


def install_console(app: FastAPI, settings: Settings) -> None:
    """After the API's error handlers: a console path's 404 (and a URL whose id is not a
    number) becomes the console's page, and a form its parser refused (400) a page
    saying why; every other path keeps the API's answer."""
    app.mount(STATIC_PATH, StaticFiles(directory=STATIC), name="console-static")
    # transformation_new first: /console/transformations/new is no transformation's id
    routers = (sign_in, overview, people, reconciliation, resource_table, source, source_actions)
    # the views of a reconciliation's workbench (issue #34)
    workbench = (workbench_suggestions, workbench_matches, workbench_resolved, workbench_history)
    exceptions = (workbench_exceptions, workbench_exceptions_actions, exceptions_export)
    for module in (*routers, *workbench, *exceptions, transformation_new, transformations):
        app.include_router(module.router)
    app.add_exception_handler(SignInRequiredError, _to_sign_in)
    app.add_exception_handler(ForbiddenError, _forbidden)
    for error_class in (StarletteHTTPException, RequestValidationError):
        app.add_exception_handler(
            error_class, _console_not_found(app.exception_handlers[error_class])
        )
    app.add_middleware(ConsoleGuard, public_url=settings.public_url)


HttpErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


def _console_not_found(api_handler: object) -> HttpErrorHandler:
    """The API's handler (async, as api/errors.py installs it) for every other path."""
    answer_of_api = cast(HttpErrorHandler, api_handler)

    async def handle(request: Request, error: Exception) -> Response:
        missing = isinstance(error, RequestValidationError) or (
            isinstance(error, StarletteHTTPException) and error.status_code == 404
        )
        if missing and is_console_path(request.url.path):
            return await run_in_threadpool(not_found_page, request)
        if (
            isinstance(error, StarletteHTTPException)
            and error.status_code == 400
            and is_console_path(request.url.path)
        ):  # a form the parser refused (a field over 1 MiB, too many fields): a page
            return await run_in_threadpool(_bad_request_page, request, str(error.detail))
        return await answer_of_api(request, error)

    return handle


def _bad_request_page(request: Request, detail: str) -> Response:
    return render(
        request,
        "bad_request.html",
        user=optional_user(request),
        status_code=400,
        title="Not read",
        detail=detail,
    )


async def _to_sign_in(request: Request, _error: Exception) -> Response:
    return sign_in.see_other(sign_in.SIGN_IN)


async def _forbidden(request: Request, _error: Exception) -> Response:
    return render(
        request, "forbidden.html", user=optional_user(request), status_code=403, title="Not allowed"
    )
