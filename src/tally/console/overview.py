"""The workspace's overview (screen 1 of issue #33), from the service GET
/api/v2/resources uses (`ResourceListing`): a page of resources at a time, never a row
of their data."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tally.console.auth import SignedIn, runtime_of
from tally.console.pages import render
from tally.services.resource_listing import FAILURE_DAYS, ResourceSummary

router = APIRouter(include_in_schema=False)
KIND_LABELS = {
    "source": "Source",
    "reconciliation": "Reconciliation output",
    "transformation": "Transformation",
}

KIND_PAGES = {"reconciliation": "reconciliations", "transformation": "transformations"}


def kind_page(resource: ResourceSummary) -> str:
    """The page of what a resource is: a source's, or the reconciliation's or
    transformation's that publishes an output (its rows are /console/resources/{id})."""
    if resource.derived is not None and resource.kind in KIND_PAGES:
        return f"/console/{KIND_PAGES[resource.kind]}/{resource.derived.id}"
    if resource.kind == "source":
        return f"/console/sources/{resource.id}"
    return f"/console/resources/{resource.id}"


@router.get("/console/overview")
def overview_page(request: Request, user: SignedIn, after: int = 0) -> Response:
    page = runtime_of(request).listing.list_page(workspace_id=user.workspace_id, after_id=after)
    return render(
        request,
        "overview.html",
        user=user,
        title="Overview",
        page=page,
        first_page=after == 0,
        kinds=KIND_LABELS,
        kind_page=kind_page,
        failure_days=FAILURE_DAYS,
    )
