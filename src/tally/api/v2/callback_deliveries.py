"""GET /api/v2/sources/{id}/callback-deliveries: a source's status-callback deliveries,
newest first; POST .../{delivery_id}/retry: one made due at once (issue #33, beside the
console's source page, for integrations)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError

from tally.api.deps import CallbackDeliveriesDep
from tally.api.errors import v2_responses
from tally.api.v2.auth import AuthorisedWorkspace, KeyActor
from tally.api.v2.delivery_bodies import DeliveryListResponse, DeliveryResponse
from tally.core import errors

router = APIRouter(prefix="/api/v2", tags=["Ingestion API"])
MAX_DELIVERIES_PAGE = 500
ERRORS = (
    errors.IngestionForbiddenError,
    errors.ResourceNotFoundError,
    RequestValidationError,
)


@router.get(
    "/sources/{source_id}/callback-deliveries",
    response_model=DeliveryListResponse,
    summary="A source's status-callback deliveries, newest first",
    responses=v2_responses(*ERRORS),
)
async def list_deliveries(
    deliveries: CallbackDeliveriesDep,
    workspace: AuthorisedWorkspace,
    source_id: Annotated[int, Path()],
    before: Annotated[int | None, Query(ge=1, description="Deliveries with a smaller id.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_DELIVERIES_PAGE)] = 100,
) -> DeliveryListResponse:
    found = await run_in_threadpool(
        deliveries.list_page,
        workspace_id=workspace.id,
        source_id=source_id,
        before_id=before,
        limit=limit,
    )
    return DeliveryListResponse(
        data=[DeliveryResponse.of(view) for view in found],
        next_before=found[-1].id if len(found) == limit else None,
    )


@router.post(
    "/sources/{source_id}/callback-deliveries/{delivery_id}/retry",
    response_model=DeliveryResponse,
    summary="Retry a pending or failed delivery now",
    description=(
        "Makes the delivery due at once: the worker sends it next (the same body and "
        "`webhook-id`). A failed delivery gets one more attempt; if it fails, it is "
        "failed again. A delivery being sent at this moment is answered as it is. 409 "
        "for a delivered one, or one whose endpoint answered 410 Gone (disabled)."
    ),
    responses=v2_responses(*ERRORS, errors.DeliveryNotFoundError, errors.ConflictError),
)
async def retry_delivery(
    deliveries: CallbackDeliveriesDep,
    workspace: AuthorisedWorkspace,
    actor: KeyActor,
    source_id: Annotated[int, Path()],
    delivery_id: Annotated[int, Path()],
) -> DeliveryResponse:
    view = await run_in_threadpool(
        deliveries.retry_now,
        workspace_id=workspace.id,
        source_id=source_id,
        delivery_id=delivery_id,
        by=actor,
    )
    return DeliveryResponse.of(view)
