"""GET /api/v2/sources/{id}/files[/{file_id}]: every file's status, attempts and outcome;
GET .../{file_id}/attempts: the attempts that did not deliver it;
DELETE /api/v2/sources/{id}/files/{file_id}: a delivered file taken back (issue 32).

Beyond the spec, which leaves status callbacks as the only way to learn an outcome:
an integration can poll instead, or reconcile its own records against tally's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from tally.api.deps import FilesDep
from tally.api.errors import v2_responses
from tally.api.v2.auth import AuthorisedWorkspace, KeyActor
from tally.api.v2.file_bodies import (
    FileAttemptListResponse,
    FileAttemptResponse,
    FileListResponse,
    FileStatusResponse,
)
from tally.core import errors

router = APIRouter(prefix="/api/v2", tags=["Ingestion API"])
MAX_FILES_PAGE = 1000


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


@router.get(
    "/sources/{source_id}/files/{file_id}/attempts",
    response_model=FileAttemptListResponse,
    summary="The attempts that did not deliver a file, first first",
    description="Each with its error, when it ended, and when the next was due (null: "
    "the file failed with it). The attempt that delivers a file is the file itself; "
    "attempts made before migration 0016 are not listed (`attempts` counts them).",
    responses=v2_responses(*ERRORS),
)
async def list_file_attempts(
    files: FilesDep,
    workspace: AuthorisedWorkspace,
    source_id: Annotated[int, Path()],
    file_id: Annotated[int, Path()],
) -> FileAttemptListResponse:
    found = await run_in_threadpool(
        files.list_file_attempts,
        workspace_id=workspace.id,
        source_id=source_id,
        file_id=file_id,
    )
    return FileAttemptListResponse(data=[FileAttemptResponse.of(a) for a in found])


@router.delete(
    "/sources/{source_id}/files/{file_id}",
    response_model=FileStatusResponse,
    summary="Take a delivered file back: its rows removed",
    description=(
        "Removes the rows the file inserted, in one transaction, and marks the file "
        "`retracted` with who did it and when. Every derived resource reading the source "
        "runs again; a `file.retracted` status callback is sent. Manual reconciliation work "
        "on the removed rows is retired with the reason (kept in the actions' history); "
        "work on other rows is kept, carried to the rows' new positions where they moved. "
        "A file taken back already is answered as it is; a file that was not delivered is "
        "a 409 naming its status."
    ),
    responses=v2_responses(*ERRORS, errors.ConflictError),
)
async def retract_file(
    files: FilesDep,
    workspace: AuthorisedWorkspace,
    actor: KeyActor,
    source_id: Annotated[int, Path()],
    file_id: Annotated[int, Path()],
) -> FileStatusResponse:
    record = await run_in_threadpool(
        files.retract,
        workspace_id=workspace.id,
        source_id=source_id,
        file_id=file_id,
        by=actor,
    )
    return FileStatusResponse.of(record)
