"""The source page's actions, each an admin's (checked here, on the server): "Upload" a
CSV file (the service POST /api/v2/sources/{id}/feed-source uses, the sender recorded as
the user's name), "Rotate" the webhook's id (shown once, on the answer to the POST, never
in a URL) and "Retry now" a status-callback delivery.

The upload form is multipart; Starlette reads it (spooling the file to a temporary file),
after the declared length is checked against TALLY_MAX_FILE_BYTES, so no more than the
limit is ever read. The upload script (static/upload.js) asks for JSON (`Accept`); a
browser without it gets a 303 to the file's page, or the source page with the error
beside the field."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import IO

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException

from tally.console.auth import AdminUser, runtime_of
from tally.console.pages import not_found_page, render
from tally.console.sign_in import see_other
from tally.console.source import WEBHOOK_PATTERN, PageState, source_view, status_json
from tally.core.errors import (
    ConflictError,
    DeliveryNotFoundError,
    InvalidUploadError,
    ResourceNotFoundError,
    UploadTooLargeError,
    WebhookNotFoundError,
)
from tally.core.names import FILENAME_MAX_CHARS, has_control_characters
from tally.core.users import User

router = APIRouter(include_in_schema=False)
FORM_OVERHEAD_BYTES = 64 * 1024  # the form's boundaries and part headers beyond the file
READ_CHUNK_BYTES = 1024 * 1024


@router.post("/console/sources/{source_id}/upload")
async def upload(request: Request, admin: AdminUser, source_id: int) -> Response:
    """Stage the form's one file and queue it, as the API's upload does."""
    uploads = runtime_of(request).uploads
    try:
        await run_in_threadpool(
            uploads.check_source, workspace_id=admin.workspace_id, source_id=source_id
        )
    except ResourceNotFoundError:
        return await run_in_threadpool(not_found_page, request)
    try:
        _check_length(request, uploads.max_file_bytes)
        async with _form(request) as form:  # its files are closed (and deleted) on exit
            chosen = _chosen_file(form)
            filename = _filename(chosen)  # before any byte is staged
            staged = await run_in_threadpool(
                uploads.stage_csv, _chunks(chosen.file), what="the file"
            )
        accepted = await run_in_threadpool(
            uploads.queue_upload,
            workspace_id=admin.workspace_id,
            source_id=source_id,
            staged=staged,
            filename=filename,
            idempotency_key=None,
            by=admin.name,
        )
    except (UploadTooLargeError, InvalidUploadError) as error:
        status = 413 if isinstance(error, UploadTooLargeError) else 400
        return await run_in_threadpool(_refused, request, admin, source_id, error.message, status)
    record = await run_in_threadpool(
        runtime_of(request).files.get_source_file,
        workspace_id=admin.workspace_id,
        source_id=source_id,
        file_id=accepted.file_id,
    )
    if _wants_json(request):
        return JSONResponse(status_json(record), status_code=202)
    return see_other(str(status_json(record)["url"]))


def _check_length(request: Request, max_file_bytes: int) -> None:
    """Before a byte is read: the declared length within the limit (uvicorn refuses a
    body longer than it declares)."""
    declared = request.headers.get("content-length", "")
    if not (declared.isascii() and declared.isdigit()):
        raise InvalidUploadError("the form has no length: send it from the page's form")
    if int(declared) > max_file_bytes + FORM_OVERHEAD_BYTES:
        raise UploadTooLargeError(f"the file is larger than the limit of {max_file_bytes} bytes")


@contextlib.asynccontextmanager
async def _form(request: Request) -> AsyncIterator[FormData]:
    try:
        async with request.form(max_files=1, max_fields=1) as form:
            yield form
    except MultiPartException as error:
        raise InvalidUploadError(f"the form could not be read: {error.message}") from None


def _chosen_file(form: FormData) -> UploadFile:
    chosen = form.get("file")
    if not isinstance(chosen, UploadFile) or not chosen.filename:
        raise InvalidUploadError("choose a CSV file to upload", field="file")
    return chosen


def _filename(chosen: UploadFile) -> str:
    name = (chosen.filename or "")[:FILENAME_MAX_CHARS]
    if has_control_characters(name):
        raise InvalidUploadError("the file name must not contain control characters", field="file")
    return name


def _chunks(file: IO[bytes]) -> Iterator[bytes]:
    while chunk := file.read(READ_CHUNK_BYTES):
        yield chunk


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def _refused(
    request: Request, admin: User, source_id: int, message: str, status_code: int
) -> Response:
    """The upload's error: JSON for the script, else the page with it beside the field."""
    if _wants_json(request):
        return JSONResponse({"error": _sentence(message)}, status_code=status_code)
    return source_view(
        request,
        admin,
        PageState(source_id),
        upload_error=_sentence(message),
        status_code=status_code,
    )


def _sentence(message: str) -> str:
    """A service's message (`the file is empty: ...`) as a sentence on a page."""
    return message[:1].upper() + message[1:] + "."


@router.post("/console/sources/{source_id}/webhook/rotate")
def rotate_webhook(request: Request, admin: AdminUser, source_id: int) -> Response:
    """The new id is on this answer only (not stored, not in a URL): a reload of the
    source page never shows it."""
    runtime = runtime_of(request)
    try:
        webhook_id = runtime.webhooks.rotate(
            workspace_id=admin.workspace_id, source_id=source_id, by=admin.name
        )
        source = runtime.listing.get(
            workspace_id=admin.workspace_id, resource_id=source_id, kind="source"
        )
    except (ResourceNotFoundError, WebhookNotFoundError):
        return not_found_page(request)
    return render(
        request,
        "webhook_rotated.html",
        user=admin,
        title=f"New webhook id for {source.name}",
        source=source,
        webhook_id=webhook_id,
        webhook_pattern=WEBHOOK_PATTERN,
    )


@router.post("/console/sources/{source_id}/deliveries/{delivery_id}/retry")
def retry_delivery(
    request: Request, admin: AdminUser, source_id: int, delivery_id: int
) -> Response:
    try:
        runtime_of(request).callback_deliveries.retry_now(
            workspace_id=admin.workspace_id,
            source_id=source_id,
            delivery_id=delivery_id,
            by=admin.name,
        )
    except (ResourceNotFoundError, DeliveryNotFoundError):
        return not_found_page(request)
    except ConflictError as error:
        return source_view(
            request,
            admin,
            PageState(source_id),
            action_error=_sentence(error.message),
            status_code=409,
        )
    return see_other(f"/console/sources/{source_id}?retried={delivery_id}#deliveries")
