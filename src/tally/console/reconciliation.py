"""A reconciliation's page (issue #33's screen 5): its last run's figures by status and
by side, its inputs and links to its rows, read-only; the analysts' workbench (the next
issue) grows here. Rendered from `ReconciliationSummaries`, the same reconciliation and
listing GET /api/v2/reconciliations/{id} and GET /api/v2/resources read."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tally.console.auth import SignedIn, runtime_of
from tally.console.overview import KIND_LABELS, kind_page
from tally.console.pages import not_found_page, render
from tally.core.errors import ReconciliationNotFoundError
from tally.core.reconciliation import MatchStatus

router = APIRouter(include_in_schema=False)
# last_run.counts' rows per side (the rest are matches per status)
ROWS_PER_SIDE = ("unmatched_left", "unmatched_right", "resolved_left", "resolved_right")
ROW_STATUSES = (MatchStatus.UNMATCHED, MatchStatus.RESOLVED)  # counted by rows per side


@router.get("/console/reconciliations/{reconciliation_id}")
def reconciliation_page(request: Request, user: SignedIn, reconciliation_id: int) -> Response:
    """Another workspace's reconciliation, or an id that is none, is the missing page."""
    try:
        summary = runtime_of(request).reconciliation_summaries.get(
            workspace_id=user.workspace_id, reconciliation_id=reconciliation_id
        )
    except ReconciliationNotFoundError:
        return not_found_page(request)
    counts = (summary.last_run or {}).get("counts") or {}
    return render(
        request,
        "reconciliation.html",
        user=user,
        title=summary.reconciliation.name,
        summary=summary,
        statuses=match_statuses(counts),
        kinds=KIND_LABELS,
        kind_page=kind_page,
    )


def match_statuses(counts: dict[str, int]) -> list[tuple[str, int]]:
    """The matches per status, the engine's statuses in their order, then any other the
    run counted (a status of a later version is shown, not dropped)."""
    known = [str(s) for s in MatchStatus if s not in ROW_STATUSES]
    others = sorted(k for k in counts if k not in known and k not in ROWS_PER_SIDE)
    return [(status, int(counts.get(status, 0))) for status in (*known, *others)]
