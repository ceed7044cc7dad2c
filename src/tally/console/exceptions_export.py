"""The Exceptions view's "Export CSV" of one side: every row of the side's view (its
filters, the text search included, and its sort; its page ignored), read by the export
the resource table's uses (`RowExport`), from the same request its page is read with."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from tally.console.auth import SignedIn, runtime_of
from tally.console.exceptions_view import (
    BadExceptionsViewError,
    ExceptionsView,
    reference_contains,
)
from tally.console.pages import not_found_page
from tally.console.resource_table import csv_download
from tally.console.workbench_exceptions import rows_request, side_query
from tally.core.errors import (
    InvalidRequestError,
    ReconciliationNotFoundError,
    ResourceNotFoundError,
)
from tally.core.reconciliation import ReconciliationDefinition, SideName

router = APIRouter(include_in_schema=False)


@router.get("/console/reconciliations/{reconciliation_id}/exceptions/export.csv")
def export_side(
    request: Request, user: SignedIn, reconciliation_id: int, side: str = ""
) -> Response:
    """`?side=left&<the view's parameters>`; a viewer may. Another workspace's
    reconciliation is the missing page; a view no control could make, a 400."""
    runtime = runtime_of(request)
    try:
        shown = runtime.reconciliations.get(
            workspace_id=user.workspace_id, derived_id=reconciliation_id
        )
        definition = ReconciliationDefinition.from_json(shown.definition)
        if side not in tuple(SideName):
            raise BadExceptionsViewError("side must be left or right.")
        which = SideName(side)
        view = ExceptionsView.of(request.query_params.multi_items()).side(which)
        query = side_query(definition, which, view)
        contains = reference_contains(definition, which, view)
        export = runtime.exports.open(rows_request(user, shown, query, contains=contains))
    except (ReconciliationNotFoundError, ResourceNotFoundError):
        return not_found_page(request)
    except (BadExceptionsViewError, InvalidRequestError) as refused:
        return PlainTextResponse(str(refused), status_code=400)
    return csv_download(export.chunks, export.name)
