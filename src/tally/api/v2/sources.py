"""POST /api/v2/sources and POST /api/v2/sources/{id}/feed-source (the upload flow).

A feed's body is streamed by a worker thread into the blob store (JSON through the
converter first), so its size never meets memory; see services/uploads.py."""

from __future__ import annotations

from collections.abc import Generator
from contextlib import closing
from typing import Annotated

import anyio.from_thread
from fastapi import APIRouter, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from python_multipart.multipart import parse_options_header
from starlette.requests import ClientDisconnect

from tally.api.deps import SourcesDep, UploadsDep
from tally.api.errors import json_response, v2_responses
from tally.api.v2.auth import AuthorisedWorkspace, KeyActor
from tally.api.v2.bodies import MAX_DEFINITION_BYTES, json_request_body, read_json, validate_body
from tally.api.v2.multipart import MULTIPART_OVERHEAD_BYTES, MultipartFile
from tally.api.v2.source_bodies import (
    SourceCreateBody,
    SourceCreatedResponse,
    UploadAcceptedResponse,
)
from tally.core import errors
from tally.services import json_rows, uploads
from tally.services.callback_endpoints import CallbackConfig
from tally.services.sources import SourceDefinition
from tally.services.uploads import StagedFile, UploadService

router = APIRouter(prefix="/api/v2", tags=["Ingestion API"])

CSV_TYPES = ("text/csv", "application/csv", "text/plain")
CREATE_ERRORS = (
    errors.IngestionForbiddenError,
    errors.DefinitionRejectedError,
    errors.InvalidBodyError,
    errors.StorageProvisioningError,
)
# IncompleteBodyError is not among them: its 400 goes to a client that has left.
FEED_ERRORS = (
    errors.IngestionForbiddenError,
    errors.ResourceNotFoundError,
    errors.UploadTooLargeError,
    errors.UnsupportedMediaTypeError,
    errors.InvalidUploadError,
    errors.IdempotencyKeyReusedError,
    RequestValidationError,
)


def _definition(body: SourceCreateBody) -> SourceDefinition:
    callback = None
    if body.notification_config is not None:
        config = body.notification_config
        events = tuple(config.events) if config.events is not None else None
        callback = CallbackConfig(config.url, config.secret, events)
    return SourceDefinition(
        body.name,
        body.folder_id,
        body.declared_columns(),
        callback,
        body.encoding,
        body.file_layout(),
        body.mode,
    )


@router.post(
    "/sources",
    status_code=201,
    summary="Create a source fed by uploads",
    response_model=SourceCreatedResponse,
    responses=v2_responses(*CREATE_ERRORS),
    openapi_extra=json_request_body(SourceCreateBody),
)
async def create_source(
    request: Request, workspace: AuthorisedWorkspace, sources: SourcesDep
) -> Response:
    body = validate_body(SourceCreateBody, await read_json(request, max_bytes=MAX_DEFINITION_BYTES))
    source = await run_in_threadpool(
        sources.create_source,
        workspace_id=workspace.id,
        definition=_definition(body),
    )
    return json_response({"id": source.id, "name": source.name}, status_code=201)


def _body_chunks(request: Request) -> Generator[bytes, None, None]:
    """The request body, pulled from the event loop by the worker thread iterating it."""
    stream = request.stream()

    async def next_chunk() -> bytes | None:
        return await anext(stream, None)

    async def close() -> None:
        await stream.aclose()

    try:
        while (chunk := anyio.from_thread.run(next_chunk)) is not None:
            if chunk:
                yield chunk
    finally:
        anyio.from_thread.run(close)


def _receive(
    request: Request, uploader: UploadService, media_type: str, options: dict[bytes, bytes]
) -> tuple[StagedFile, str | None]:
    """Stage the body (runs in a worker thread): the staged bytes and the file's name."""
    max_bytes = uploader.max_file_bytes
    declared = request.headers.get("content-length", "")
    if (
        declared.isascii()
        and declared.isdigit()
        and int(declared) > max_bytes + MULTIPART_OVERHEAD_BYTES
    ):
        raise errors.UploadTooLargeError(f"the body is larger than the limit of {max_bytes} bytes")
    boundary = options.get(b"boundary")
    if media_type == "multipart/form-data" and not boundary:
        raise errors.InvalidUploadError("the multipart Content-Type has no boundary")
    with closing(_body_chunks(request)) as chunks:  # closed here, in this thread
        if media_type == "application/json":
            return uploader.stage_json(chunks), None
        if boundary and media_type == "multipart/form-data":
            body = uploads.limited(chunks, max_bytes + MULTIPART_OVERHEAD_BYTES, "the body")
            part = MultipartFile(body, boundary)
            return uploader.stage_csv(part, what="the file"), part.filename
        return uploader.stage_csv(chunks), None


FEED_DESCRIPTION = f"""\
Send one file's rows; the answer (202) means queued, not loaded: the worker loads the
file like a webhook's download, and status callbacks report the outcome.

The body is one of:

- `text/csv` (or `application/csv`, `text/plain`): the CSV file itself, streamed.
- `multipart/form-data`: one part named `file` holding the CSV (its filename is kept).
- `application/json`: rows, converted to CSV by these rules:

{json_rows.RULES}
The body is limited to TALLY_MAX_FILE_BYTES (413 above it, nothing stored). A typed
source receives only files with exactly its columns; a file that differs ends `failed`,
its error naming the columns. Send an `Idempotency-Key` header to make retries queue the
file once: a retry (the same bytes, file name and content type) answers with the file
first queued and its current status; the key sent with a different file is refused
(422, `errors[0].field` `header.Idempotency-Key`), and nothing is queued.
"""
_CSV = {"type": "string", "minLength": 1}  # text; never empty, a CSV has a header line
_BINARY = {"type": "string", "format": "binary", "minLength": 1}
_ROWS = {  # the rules below the first level are the description's (json_rows.RULES)
    "type": "array",
    "items": {"type": "object", "propertyNames": {"minLength": 1}},
    "minItems": 1,
    "contains": {"type": "object", "minProperties": 1},
}
_ROWS_OBJECT = {"type": "object", "required": ["rows"], "properties": {"rows": _ROWS}}
_FILE_PART = {
    "type": "object",
    "required": ["file"],
    "properties": {"file": _BINARY},
    "additionalProperties": False,
}
FEED_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            **{media: {"schema": _CSV} for media in CSV_TYPES},
            "multipart/form-data": {"schema": _FILE_PART},
            "application/json": {"schema": {"oneOf": [_ROWS, _ROWS_OBJECT]}},
        },
    }
}


@router.post(
    "/sources/{source_id}/feed-source",
    status_code=202,
    summary="Upload a file (CSV, multipart or JSON rows) into a source",
    description=FEED_DESCRIPTION,
    response_model=UploadAcceptedResponse,
    responses=v2_responses(*FEED_ERRORS),
    openapi_extra=FEED_BODY,
)
async def feed_source(
    request: Request,
    workspace: AuthorisedWorkspace,
    uploader: UploadsDep,
    actor: KeyActor,
    source_id: Annotated[int, Path(description="The source id.")],
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            description="Retries carrying the same key queue the file once; the key "
            "with a different file: 422.",
        ),
    ] = None,
) -> Response:
    await run_in_threadpool(  # 404 before the body is read
        uploader.check_source, workspace_id=workspace.id, source_id=source_id
    )
    media_type, options = parse_options_header(request.headers.get("content-type"))
    if media_type.decode() not in (*CSV_TYPES, "multipart/form-data", "application/json"):
        raise errors.UnsupportedMediaTypeError()
    try:
        staged, filename = await run_in_threadpool(
            _receive, request, uploader, media_type.decode(), options
        )
    except ClientDisconnect:
        raise errors.IncompleteBodyError() from None
    accepted = await run_in_threadpool(
        uploader.queue_upload,
        workspace_id=workspace.id,
        source_id=source_id,
        staged=staged,
        filename=filename,
        idempotency_key=idempotency_key,
        by=actor,
    )
    return json_response({"file_id": accepted.file_id, "status": accepted.status}, 202)
