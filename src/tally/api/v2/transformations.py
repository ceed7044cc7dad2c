"""/api/v2/transformations (issue #12): define, preview, list, replace and delete
transformations, resources derived from others by one SELECT.

The same three headers and the same uniform 403 as the other /api/v2 routes, without
the workspace's ingestion switch. The output is read through the Data API
(`GET /api/v1/resources/{resource_id}/data`) like any resource.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field

from tally.api.deps import PreviewsDep, TransformationsDep
from tally.api.errors import json_response, v2_responses
from tally.api.v2.auth import KeyedWorkspace
from tally.api.v2.bodies import json_request_body
from tally.api.v2.derived_routes import (
    AUTH,
    DEFINED,
    MAX_PAGE,
    deleted,
    page,
    read_definition,
    shown,
)
from tally.core import errors
from tally.services.transformations.bodies import TransformationDefinitionBody
from tally.services.transformations.service import columns_json

router = APIRouter(prefix="/api/v2", tags=["Transformation API"])

BASE = "/transformations"
ONE = BASE + "/{transformation_id}"
FOUND = (*AUTH, errors.TransformationNotFoundError, RequestValidationError)

TransformationId = Annotated[int, Path(description="The transformation's id.")]


class ColumnResponse(BaseModel):
    name: str
    type: Literal["text", "integer", "decimal", "date", "timestamp", "boolean"]


class TransformationCreatedResponse(BaseModel):
    id: int = Field(description="The transformation's id.")
    name: str
    resource_id: int = Field(description="The output: read it at /api/v1/resources/{id}/data.")
    columns: list[ColumnResponse] = Field(description="The output's columns, in order.")


class TransformationResponse(TransformationCreatedResponse):
    definition: TransformationDefinitionBody
    state: Literal["queued", "running", "idle", "failed"] = Field(
        description="`queued`: a run is due; `failed`: the last run failed for good "
        "(`error` says why; a change to an input or a PUT queues a new one)."
    )
    error: str | None
    last_run: dict[str, Any] | None = Field(
        description="The last successful run: started_at, finished_at, rows, incremental "
        "and inputs (each input's resource_id and data_version); null before the first."
    )


class TransformationListResponse(BaseModel):
    data: list[TransformationResponse]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


class PreviewResponse(BaseModel):
    columns: list[ColumnResponse]
    rows: list[dict[str, Any]] = Field(description="The first 20 rows, as a page shows them.")


@router.post(
    BASE,
    status_code=201,
    summary="Define a transformation; its first run is queued at once",
    response_model=TransformationCreatedResponse,
    responses=v2_responses(*AUTH, *DEFINED, errors.StorageProvisioningError),
    openapi_extra=json_request_body(TransformationDefinitionBody),
)
async def create_transformation(
    request: Request, workspace: KeyedWorkspace, service: TransformationsDep
) -> Response:
    body = await read_definition(request)
    created = await run_in_threadpool(service.create, workspace_id=workspace.id, body=body)
    return json_response(
        {
            "id": created.id,
            "name": created.name,
            "resource_id": created.resource_id,
            "columns": columns_json(created.columns),
        },
        201,
    )


@router.post(
    BASE + "/preview",
    summary="The columns and first 20 rows of a definition, creating nothing",
    description="A preview runs the query for up to TALLY_TRANSFORMATION_TIMEOUT_SECONDS. "
    "An API process runs at most TALLY_PREVIEW_WORKSPACE_CONCURRENCY of one workspace's "
    "at once (one more: 429) and TALLY_PREVIEW_CONCURRENCY in all (one more: 503); "
    "either is answered at once, with `Retry-After`.",
    response_model=PreviewResponse,
    responses=v2_responses(
        *AUTH, *DEFINED, errors.RunFailedError, errors.TooManyPreviewsError, errors.BusyError
    ),
    openapi_extra=json_request_body(TransformationDefinitionBody),
)
async def preview_transformation(
    request: Request, workspace: KeyedWorkspace, previews: PreviewsDep
) -> Response:
    body = await read_definition(request)
    # On a preview thread, never this loop's nor the requests' threadpool (issue #30).
    preview = await asyncio.wrap_future(previews.submit(workspace_id=workspace.id, body=body))
    columns = json_response(columns_json(preview.columns)).body
    rows = b",".join(row.encode() for row in preview.rows)  # stored text: exact decimals
    content = b'{"columns":' + bytes(columns) + b',"rows":[' + rows + b"]}"
    return Response(content, media_type="application/json")


@router.api_route(BASE + "/preview", methods=["GET", "PUT", "DELETE"], include_in_schema=False)
async def preview_other_methods() -> Response:
    """`preview` is no transformation's id: these methods are 405s, not 422s of an id."""
    body = {"errors": [{"field": None, "message": "Method Not Allowed"}]}
    response = json_response(body, 405)
    response.headers["Allow"] = "POST"
    return response


@router.get(
    BASE,
    summary="The workspace's transformations, oldest first",
    response_model=TransformationListResponse,
    responses=v2_responses(*AUTH, RequestValidationError),
)
async def list_transformations(
    workspace: KeyedWorkspace,
    service: TransformationsDep,
    after: Annotated[int, Query(ge=0, description="Transformations with a larger id.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
) -> Response:
    return await page(
        service.list_transformations, workspace_id=workspace.id, after_id=after, limit=limit
    )


@router.get(
    ONE,
    summary="A transformation: its definition, columns, state and last run",
    response_model=TransformationResponse,
    responses=v2_responses(*FOUND),
)
async def get_transformation(
    transformation_id: TransformationId, workspace: KeyedWorkspace, service: TransformationsDep
) -> Response:
    return await shown(service.get, workspace_id=workspace.id, transformation_id=transformation_id)


@router.put(
    ONE,
    summary="Replace the definition; a run is queued at once",
    response_model=TransformationResponse,
    responses=v2_responses(*FOUND, *DEFINED),
    openapi_extra=json_request_body(TransformationDefinitionBody),
)
async def replace_transformation(
    request: Request,
    transformation_id: TransformationId,
    workspace: KeyedWorkspace,
    service: TransformationsDep,
) -> Response:
    body = await read_definition(request)
    return await shown(
        service.replace, workspace_id=workspace.id, transformation_id=transformation_id, body=body
    )


@router.delete(
    ONE,
    status_code=204,
    summary="Delete the transformation and its output resource",
    description="409 while a reconciliation or another transformation reads the output.",
    responses=v2_responses(*FOUND, errors.ConflictError),
)
async def delete_transformation(
    transformation_id: TransformationId, workspace: KeyedWorkspace, service: TransformationsDep
) -> Response:
    return await deleted(
        service.delete, workspace_id=workspace.id, transformation_id=transformation_id
    )
