"""Error class -> HTTP status, per API version; rendered by one set of handlers.

The same tables feed each route's OpenAPI `responses`, so the documentation lists
exactly what the code can answer.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel

from tally.core import errors

log = logging.getLogger("tally.api")

# Data API (v1): status for each error family; the detail is the error's own message.
V1_STATUS: dict[type[errors.TallyError], int] = {
    errors.InvalidWorkspaceHeaderError: 400,
    errors.UnknownNameError: 400,
    errors.QueryNotApplicableError: 400,
    errors.InvalidCredentialsError: 401,
    errors.ResourceOwnershipError: 403,
    errors.WorkspaceNotFoundError: 404,
    errors.ResourceNotFoundError: 404,
    errors.StorageError: 503,
}

# Ingestion API (v2): errors travel as {"errors": [{"field": ..., "message": ...}]}.
V2_STATUS: dict[type[errors.TallyError], int] = {
    errors.IngestionForbiddenError: 403,
    errors.DefinitionRejectedError: 400,
    errors.InvalidNotificationError: 400,
    errors.LoadError: 400,
    errors.NotFoundError: 404,
    errors.StorageProvisioningError: 502,
    errors.StorageError: 503,
}
V2_PREFIX = "/api/v2"
FORBIDDEN_MESSAGE = "Forbidden"
NOT_FOUND_MESSAGE = "Not Found"

INTERNAL_ERROR_DETAIL = "Internal server error"


class ErrorResponse(BaseModel):
    detail: str


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


def status_for(error: errors.TallyError, table: dict[type[errors.TallyError], int]) -> int:
    for cls in type(error).__mro__:
        if cls in table:
            return table[cls]
    return 500


def v1_error_response(error: errors.TallyError) -> Response:
    status = status_for(error, V1_STATUS)
    if status >= 500 and status != 503:
        log.error("request_failed", exc_info=error)
        return json_response({"detail": INTERNAL_ERROR_DETAIL}, status_code=500)
    return json_response({"detail": error.message}, status_code=status)


def v2_errors(problems: list[tuple[str | None, str]], status_code: int) -> Response:
    return json_response({"errors": [{"field": f, "message": m} for f, m in problems]}, status_code)


def v2_error_response(error: errors.TallyError) -> Response:
    status = status_for(error, V2_STATUS)
    if isinstance(error, errors.DefinitionRejectedError):
        return v2_errors([(p.field, p.message) for p in error.problems], status)
    if isinstance(error, errors.IngestionForbiddenError):
        return v2_errors([(None, FORBIDDEN_MESSAGE)], status)  # no hint of which check
    if isinstance(error, errors.NotFoundError):
        return v2_errors([(None, NOT_FOUND_MESSAGE)], status)
    if isinstance(error, errors.InvalidNotificationError):
        return v2_errors([(error.field, error.message)], status)
    if status == 500:
        log.error("request_failed", exc_info=error)
        return v2_errors([(None, INTERNAL_ERROR_DETAIL)], 500)
    return v2_errors([(getattr(error, "column", None), error.message)], status)


def validation_problems(exc_errors: Any) -> list[tuple[str | None, str]]:
    """Pydantic / FastAPI validation errors as (dotted field, message) pairs."""
    out: list[tuple[str | None, str]] = []
    for item in exc_errors:
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body",)]
        out.append((".".join(loc) or None, str(item.get("msg", "invalid"))))
    return out


def openapi_responses(descriptions: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"model": ErrorResponse, "description": text}
        for status, text in descriptions.items()
    }


def install_error_handlers(app: FastAPI) -> None:
    async def on_tally_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, errors.TallyError)
        if request.url.path.startswith(V2_PREFIX):
            return v2_error_response(exc)
        return v1_error_response(exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if request.url.path.startswith(V2_PREFIX):
            return v2_errors(validation_problems(exc.errors()), 422)
        return await request_validation_exception_handler(request, exc)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.error("request_crashed path=%s", request.url.path, exc_info=exc)
        if request.url.path.startswith(V2_PREFIX):
            return v2_errors([(None, INTERNAL_ERROR_DETAIL)], 500)
        return json_response({"detail": INTERNAL_ERROR_DETAIL}, status_code=500)

    app.add_exception_handler(errors.TallyError, on_tally_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(Exception, on_unexpected)
