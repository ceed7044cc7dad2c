"""GET /api/v2/sources/{id}/files[/{file_id}]: every file's status, attempts and outcome.

Beyond the spec, which leaves status callbacks as the only way to learn an outcome:
an integration can poll instead, or reconcile its own records against tally's.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field

from tally.api.deps import FilesDep
from tally.api.errors import v2_responses
from tally.api.v2.auth import AuthorisedWorkspace
from tally.core import errors
from tally.core.files import FileRecord

router = APIRouter(prefix="/api/v2", tags=["Ingestion API"])
MAX_FILES_PAGE = 1000


class FileStatusResponse(BaseModel):
    id: int
    source_id: int
    origin: str = Field(description="webhook or upload")
    filename: str | None
    url: str | None = Field(description="The file URL without its query string.")
    status: str = Field(
        description="queued, downloading, loading, delivered, duplicate "
        "or failed (the last three are final)."
    )
    attempts: int
    error: str | None
    warnings: list[str] = Field(
        description="What the load noticed without failing the file: a column kept as "
        "text whose values are dates in a format tally does not guess (which formats fit, "
        "and how to declare one). Empty when nothing."
    )
    rows: int | None
    bytes: int | None
    sha256: str | None
    idempotency_key: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None

    @classmethod
    def of(cls, record: FileRecord) -> FileStatusResponse:
        return cls(
            id=record.id,
            source_id=record.resource_id,
            origin=record.origin,
            filename=record.filename,
            url=record.url_redacted,
            status=record.status,
            attempts=record.attempts,
            error=record.error,
            warnings=record.warnings or [],
            rows=record.rows,
            bytes=record.bytes,
            sha256=record.sha256,
            idempotency_key=record.idempotency_key,
            created_at=record.created_at,
            updated_at=record.updated_at,
            finished_at=record.finished_at,
        )


class FileListResponse(BaseModel):
    data: list[FileStatusResponse]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


ERRORS = (
    errors.IngestionForbiddenError,
    errors.ResourceNotFoundError,
    errors.FileNotFoundInSourceError,
    RequestValidationError,
)


@router.get(
    "/sources/{source_id}/files",
    response_model=FileListResponse,
    summary="The files of a source, oldest first",
    responses=v2_responses(*ERRORS),
)
async def list_files(
    files: FilesDep,
    workspace: AuthorisedWorkspace,
    source_id: Annotated[int, Path()],
    after: Annotated[int, Query(ge=0, description="Files with a larger id.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_FILES_PAGE)] = 100,
) -> FileListResponse:
    records = await run_in_threadpool(
        files.list_source_files,
        workspace_id=workspace.id,
        source_id=source_id,
        after_id=after,
        limit=limit,
    )
    return FileListResponse(
        data=[FileStatusResponse.of(r) for r in records],
        next_after=records[-1].id if len(records) == limit else None,
    )


@router.get(
    "/sources/{source_id}/files/{file_id}",
    response_model=FileStatusResponse,
    summary="One file's status",
    responses=v2_responses(*ERRORS),
)
async def get_file(
    files: FilesDep,
    workspace: AuthorisedWorkspace,
    source_id: Annotated[int, Path()],
    file_id: Annotated[int, Path()],
) -> FileStatusResponse:
    record = await run_in_threadpool(
        files.get_source_file,
        workspace_id=workspace.id,
        source_id=source_id,
        file_id=file_id,
    )
    return FileStatusResponse.of(record)
