"""The error tables (error class -> status and body, one per API version) and the one
place errors are rendered.

/api/v1 answers {"detail": "<message>"} (422: FastAPI's standard validation list);
/api/v2 answers {"errors": [{"field": ..., "message": ...}]}. Each route lists the
classes it can raise, and `v1_responses` / `v2_responses` turn that list into its
OpenAPI `responses` through the same tables, so the document shows exactly the statuses
a route answers and the shape it answers them in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, NamedTuple

import orjson
from fastapi import FastAPI, Request
from fastapi.exception_handlers import (
    http_exception_handler,
    request_validation_exception_handler,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from tally.core import errors
from tally.core.errors import FieldProblem

log = logging.getLogger("tally.api")

V2_PREFIX = "/api/v2"
FORBIDDEN_MESSAGE = "Forbidden"
NOT_FOUND_MESSAGE = "Not Found"
INTERNAL_ERROR_DETAIL = "Internal server error"
# The credential headers of api/v2/auth.py: a request without one is the same 403 as a
# request with a wrong one (spec part 5), never a 422 naming what is missing.
INGESTION_CREDENTIAL_HEADERS = frozenset({"x-api-key", "x-svc-workspace", "x-svc-account"})


class DataApiErrorResponse(BaseModel):
    detail: str = Field(description="The spec's message for this error.")


class DataApiValidationProblem(BaseModel):
    loc: list[str | int] = Field(description="Where: `header`, `query` or `path`, then the name.")
    msg: str
    type: str


class DataApiValidationErrorResponse(BaseModel):
    detail: list[DataApiValidationProblem]


class IngestionProblem(BaseModel):
    field: str | None = Field(
        description="The field, header or row at fault (dotted path), or null for the "
        "request as a whole."
    )
    message: str


class IngestionErrorResponse(BaseModel):
    errors: list[IngestionProblem] = Field(min_length=1)


class ErrorRow(NamedTuple):
    """How one API version answers an error class: status, body model, and what its
    OpenAPI description says (by default the class's own message)."""

    status: int
    body: type[BaseModel]
    description: str | None = None
    retry_after: bool = False  # answered with Retry-After (a BusyError's)


ErrorClass = type[Exception]
ErrorTable = dict[ErrorClass, ErrorRow]

_V1 = DataApiErrorResponse
V1_ERRORS: ErrorTable = {
    RequestValidationError: ErrorRow(
        422,
        DataApiValidationErrorResponse,
        "A missing or malformed header, parameter or path id: `detail` names each.",
    ),
    errors.InvalidWorkspaceHeaderError: ErrorRow(400, _V1),
    errors.UnknownNameError: ErrorRow(400, _V1),
    errors.QueryNotApplicableError: ErrorRow(400, _V1),
    errors.InvalidCredentialsError: ErrorRow(401, _V1),
    errors.ResourceOwnershipError: ErrorRow(403, _V1),
    errors.WorkspaceNotFoundError: ErrorRow(404, _V1),
    errors.ResourceNotFoundError: ErrorRow(404, _V1),
    errors.StorageError: ErrorRow(503, _V1),
    errors.BusyError: ErrorRow(503, _V1, retry_after=True),
    Exception: ErrorRow(500, _V1, INTERNAL_ERROR_DETAIL),
}

_V2 = IngestionErrorResponse
V2_ERRORS: ErrorTable = {
    RequestValidationError: ErrorRow(422, _V2, "A parameter failed validation; `errors` names it."),
    errors.InvalidBodyError: ErrorRow(
        422,
        _V2,
        "The body is missing, not JSON, or a field failed validation; `errors` names each.",
    ),
    errors.InvalidUploadError: ErrorRow(
        422, _V2, "The body is not what its Content-Type says; `errors` names the row or field."
    ),
    errors.IngestionForbiddenError: ErrorRow(
        403, _V2, "Authorization failed: the same answer whatever check failed."
    ),
    errors.DefinitionRejectedError: ErrorRow(
        400, _V2, "The platform rejected the definition (a duplicate name, an unknown folder)."
    ),
    errors.IdempotencyKeyReusedError: ErrorRow(
        422,
        _V2,
        "The Idempotency-Key was sent before with a different request (another URL, file "
        "name or body); nothing was queued.",
    ),
    errors.InvalidNotificationError: ErrorRow(
        400, _V2, "No http(s) URL at the webhook's `url_field` path (`errors[0].field`)."
    ),
    errors.RunFailedError: ErrorRow(
        400, _V2, "The query failed, or ran past TALLY_TRANSFORMATION_TIMEOUT_SECONDS."
    ),
    errors.RowNotFoundError: ErrorRow(
        400, _V2, "A row the body names is not in its input; `errors` names each side and row."
    ),
    errors.IncompleteBodyError: ErrorRow(400, _V2),
    errors.LoadError: ErrorRow(400, _V2),
    errors.NotFoundError: ErrorRow(
        404,
        _V2,
        "Not Found: no such source, file, webhook, reconciliation, match, resolution or "
        "transformation here.",
    ),
    errors.ConflictError: ErrorRow(
        409, _V2, "In conflict with what is there now; `errors` names each row or field."
    ),
    errors.UploadTooLargeError: ErrorRow(
        413, _V2, "The body (or the CSV made from JSON) is over TALLY_MAX_FILE_BYTES; nothing kept."
    ),
    errors.MethodNotAllowedError: ErrorRow(405, _V2),
    errors.UnsupportedMediaTypeError: ErrorRow(415, _V2),
    errors.StorageProvisioningError: ErrorRow(502, _V2),
    errors.StorageError: ErrorRow(503, _V2),
    errors.TooManyPreviewsError: ErrorRow(
        429,
        _V2,
        "The workspace's previews running at once are at TALLY_PREVIEW_WORKSPACE_CONCURRENCY; "
        "retry after `Retry-After` seconds.",
        retry_after=True,
    ),
    errors.BusyError: ErrorRow(
        503,
        _V2,
        "Busy: every database connection, or every preview slot (TALLY_PREVIEW_CONCURRENCY), "
        "is in use; retry after `Retry-After` seconds.",
        retry_after=True,
    ),
    Exception: ErrorRow(500, _V2, "Unexpected error. Retry."),
}

# The spec writes an operator's name as <op>, every other name as <name>.
_PLACEHOLDERS: dict[ErrorClass, str] = {errors.UnsupportedOperatorError: "<op>"}


def row_for(error_class: ErrorClass, table: ErrorTable) -> ErrorRow:
    """The row of the nearest mapped ancestor (`Exception` at the latest: a 500)."""
    return next(table[cls] for cls in error_class.__mro__ if cls in table)


def json_response(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


def _message_of(error_class: ErrorClass) -> str:
    """What an error of this class says, as the spec writes it (names as placeholders)."""
    if issubclass(error_class, errors.UnknownNameError):
        return error_class.template.format(name=_PLACEHOLDERS.get(error_class, "<name>"))
    return (error_class.__doc__ or error_class.__name__).strip().splitlines()[0]


RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again (every 429; a 503 when busy).",
        "schema": {"type": "integer"},
    }
}


def _responses(
    table: ErrorTable, raised: Iterable[ErrorClass], *, quoted: bool
) -> dict[int | str, dict[str, Any]]:
    by_status: dict[int, tuple[type[BaseModel], list[str]]] = {}
    retried: set[int] = set()
    for error_class in raised:
        row = row_for(error_class, table)
        if row.status == 500 and error_class is not Exception:
            raise ValueError(f"{error_class.__name__} has no row in the error table")
        if row.description is not None:
            text = row.description
        else:  # the message itself, as the client reads it
            text = f"`{_message_of(error_class)}`" if quoted else _message_of(error_class)
        texts = by_status.setdefault(row.status, (row.body, []))[1]
        if text not in texts:
            texts.append(text)
        if row.retry_after:
            retried.add(row.status)
    return {
        status: {
            "model": body,
            "description": " · ".join(texts),
            **({"headers": RETRY_AFTER_HEADER} if status in retried else {}),
        }
        for status, (body, texts) in sorted(by_status.items())
    }


def v1_responses(*raised: ErrorClass) -> dict[int | str, dict[str, Any]]:
    """A Data API route's OpenAPI `responses` for the error classes it raises."""
    return _responses(V1_ERRORS, raised, quoted=True)


def v2_responses(*raised: ErrorClass) -> dict[int | str, dict[str, Any]]:
    """An ingestion API route's OpenAPI `responses` for the error classes it raises."""
    return _responses(V2_ERRORS, raised, quoted=False)


def validation_problems(exc_errors: Any) -> list[FieldProblem]:
    """Pydantic / FastAPI validation errors as problems naming the dotted field."""
    out: list[FieldProblem] = []
    for item in exc_errors:
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body",)]
        out.append(FieldProblem(".".join(loc) or None, str(item.get("msg", "invalid"))))
    return out


def _v2_problems(error: Exception) -> list[FieldProblem]:
    if isinstance(error, RequestValidationError):
        return validation_problems(error.errors())
    if isinstance(
        error,
        errors.DefinitionRejectedError
        | errors.InvalidBodyError
        | errors.ConflictError
        | errors.RowNotFoundError,
    ):
        return error.problems
    if isinstance(error, errors.IngestionForbiddenError):
        return [FieldProblem(None, FORBIDDEN_MESSAGE)]  # no hint of which check failed
    if isinstance(error, errors.NotFoundError):
        return [FieldProblem(None, NOT_FOUND_MESSAGE)]
    if isinstance(error, errors.InvalidNotificationError):
        return [FieldProblem(error.field, error.message)]
    if isinstance(error, errors.IdempotencyKeyReusedError):
        return [FieldProblem(error.FIELD, error.message)]
    if isinstance(error, errors.LoadError):
        return [FieldProblem(error.column, error.message)]
    assert isinstance(error, errors.TallyError)
    return [FieldProblem(None, error.message)]


def _lacks_credentials(error: RequestValidationError) -> bool:
    return any(
        tuple(item.get("loc", ()))[:1] == ("header",)
        and str(item["loc"][1]).lower() in INGESTION_CREDENTIAL_HEADERS
        for item in error.errors()
    )


def _log_crash(error: Exception) -> None:
    event = "request_failed" if isinstance(error, errors.TallyError) else "request_crashed"
    log.error(event, exc_info=error)


def v2_error_response(error: Exception) -> Response:
    if isinstance(error, RequestValidationError) and _lacks_credentials(error):
        error = errors.IngestionForbiddenError()
    status = row_for(type(error), V2_ERRORS).status
    if status == 500:
        _log_crash(error)
        problems = [FieldProblem(None, INTERNAL_ERROR_DETAIL)]
    else:
        problems = _v2_problems(error)
    body = {"errors": [{"field": p.field, "message": p.message} for p in problems]}
    return _headers(error, json_response(body, status))


def v1_error_response(error: Exception) -> Response:
    status = row_for(type(error), V1_ERRORS).status
    if status == 500 or not isinstance(error, errors.TallyError):
        _log_crash(error)
        return json_response({"detail": INTERNAL_ERROR_DETAIL}, status_code=500)
    return _headers(error, json_response({"detail": error.message}, status_code=status))


def _headers(error: Exception, response: Response) -> Response:
    """A BusyError's answer says when to come back; a MethodNotAllowedError's, which
    methods the path answers."""
    if isinstance(error, errors.BusyError):
        response.headers["Retry-After"] = str(error.retry_after_seconds)
    if isinstance(error, errors.MethodNotAllowedError):
        response.headers["Allow"] = ", ".join(error.allowed)
    return response


def allowed_methods(request: Request) -> str:
    """The methods some route of the app answers at this path: FastAPI makes a route of
    each method, and a 405 from one route names only its own."""
    path = request.url.path
    return ", ".join(
        sorted(
            {
                method
                for route in request.app.routes
                if isinstance(route, APIRoute) and route.path_regex.match(path)
                for method in route.methods or ()
            }
        )
    )


def install_error_handlers(app: FastAPI) -> None:
    async def on_error(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith(V2_PREFIX):
            return v2_error_response(exc)
        if isinstance(exc, RequestValidationError):
            return await request_validation_exception_handler(request, exc)
        return v1_error_response(exc)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 405:  # every method of the path, not the first route's
            exc = StarletteHTTPException(
                405, exc.detail, {**(exc.headers or {}), "Allow": allowed_methods(request)}
            )
        return await http_exception_handler(request, exc)

    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(errors.TallyError, on_error)
    app.add_exception_handler(RequestValidationError, on_error)
    app.add_exception_handler(Exception, on_error)
