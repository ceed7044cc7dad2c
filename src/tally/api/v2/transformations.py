"""/api/v2/transformations (issue #12): define, preview, list, replace and delete
transformations, resources derived from others by one SELECT.

The same three headers and the same uniform 403 as the other /api/v2 routes, without
the workspace's ingestion switch. The output is read through the Data API
(`GET /api/v1/resources/{resource_id}/data`) like any resource.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tally.api.deps import PreviewsDep, TransformationsDep
from tally.api.errors import json_response, v2_responses
from tally.api.v2.auth import KeyedWorkspace
from tally.api.v2.bodies import json_request_body
from tally.api.v2.derived_routes import (
    AUTH,
    DEFINED,
    DefinitionRoutes,
    add_definition_routes,
    read_definition,
)
from tally.api.v2.transformation_bodies import (
    PreviewResponse,
    TransformationCreatedResponse,
    TransformationResponse,
)
from tally.core import errors
from tally.services.transformations.bodies import TransformationDefinitionBody
from tally.services.transformations.service import columns_json

router = APIRouter(prefix="/api/v2", tags=["Transformation API"])

PREVIEW = "/transformations/preview"


@router.post(
    PREVIEW,
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


@router.api_route(PREVIEW, methods=["GET", "PUT", "DELETE"], include_in_schema=False)
async def preview_other_methods() -> Response:
    """`preview` is no transformation's id: these methods are 405s, not 422s of an id."""
    raise errors.MethodNotAllowedError(allowed=("POST",))


add_definition_routes(  # after the preview's routes: `preview` is no transformation's id
    router,
    DefinitionRoutes(
        noun="transformation",
        service=TransformationsDep,
        body=TransformationDefinitionBody,
        created=TransformationCreatedResponse,
        shown=TransformationResponse,
        not_found=errors.TransformationNotFoundError,
        get_summary="A transformation: its definition, columns, state and last run",
        delete_summary="Delete the transformation and its output resource",
        delete_description="409 while a reconciliation or another transformation reads the output.",
    ),
)
