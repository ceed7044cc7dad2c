"""GET /api/v2/resources: every resource of the workspace, a page at a time, for
integrations (the console's overview reads the same service); GET /api/v2/sources/{id}:
one source the same way."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from tally.api.deps import ListingDep
from tally.api.errors import v2_responses
from tally.api.v2.auth import AuthorisedWorkspace, KeyedWorkspace
from tally.api.v2.resource_bodies import ResourceListResponse, ResourceResponse
from tally.core import errors
from tally.services.resource_listing import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

router = APIRouter(prefix="/api/v2", tags=["Resources"])


@router.get(
    "/resources",
    response_model=ResourceListResponse,
    summary="The workspace's resources, by id",
    description="Sources, reconciliation outputs and transformations: columns with their "
    "types, rows, data version, last change, and a source's last file and recent failures. "
    "No ingestion switch needed: the three headers only.",
    responses=v2_responses(errors.IngestionForbiddenError, RequestValidationError),
)
async def list_resources(
    listing: ListingDep,
    workspace: KeyedWorkspace,
    after: Annotated[int, Query(ge=0, description="Resources with a larger id.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE)] = DEFAULT_PAGE_SIZE,
) -> ResourceListResponse:
    page = await run_in_threadpool(
        listing.list_page, workspace_id=workspace.id, after_id=after, limit=limit
    )
    return ResourceListResponse(
        data=[ResourceResponse.of(summary) for summary in page.resources],
        next_after=page.next_after,
    )


@router.get(
    "/sources/{source_id}",
    response_model=ResourceResponse,
    summary="One source: columns, rows, data version, last file, recent failures",
    description="As an item of GET /api/v2/resources; 404 for a resource that is not a "
    "source of this workspace.",
    responses=v2_responses(
        errors.IngestionForbiddenError, errors.ResourceNotFoundError, RequestValidationError
    ),
)
async def get_source(
    listing: ListingDep,
    workspace: AuthorisedWorkspace,
    source_id: Annotated[int, Path()],
) -> ResourceResponse:
    summary = await run_in_threadpool(
        listing.get, workspace_id=workspace.id, resource_id=source_id, kind="source"
    )
    return ResourceResponse.of(summary)
