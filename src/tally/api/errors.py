"""Error class -> HTTP status, per API version; rendered by one set of handlers.

The same tables feed each route's OpenAPI `responses`, so the documentation lists
exactly what the code can answer.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
import orjson
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


def openapi_responses(descriptions: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"model": ErrorResponse, "description": text}
        for status, text in descriptions.items()
    }


def install_error_handlers(app: FastAPI) -> None:
    async def on_tally_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, errors.TallyError)
        return v1_error_response(exc)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.error("request_crashed path=%s", request.url.path, exc_info=exc)
        return json_response({"detail": INTERNAL_ERROR_DETAIL}, status_code=500)

    app.add_exception_handler(errors.TallyError, on_tally_error)
    app.add_exception_handler(Exception, on_unexpected)
