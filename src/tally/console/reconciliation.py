"""A reconciliation's page, the workbench's Summary view (issue #33's screen 5, issue
#34's point 1): its last run's figures by status and by side, its inputs and links to
its rows; "Run now" (admins) through the service POST /api/v2/reconciliations/{id}/runs
uses; its definition shown readably, and for admins edited as JSON and saved through
the service PUT /api/v2/reconciliations/{id} uses, each problem named by its field.
Rendered from `ReconciliationSummaries`, the same reconciliation and listing
GET /api/v2/reconciliations/{id} and GET /api/v2/resources read."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from tally.console.auth import AdminUser, SignedIn, runtime_of
from tally.console.overview import KIND_LABELS, kind_page
from tally.console.pages import not_found_page, render
from tally.console.sign_in import see_other
from tally.console.transformation_view import Problem, definition_digest
from tally.core.errors import (
    ConflictError,
    DefinitionRejectedError,
    FieldProblem,
    InvalidBodyError,
    ReconciliationNotFoundError,
)
from tally.core.reconciliation import MatchStatus
from tally.core.users import User
from tally.services.derived.lifecycle import CHANGED_MEANWHILE
from tally.services.reconciliation_figures import MATCHED_PER_STATUS
from tally.services.reconciliation_summary import ReconciliationSummary

router = APIRouter(include_in_schema=False)
PAGE = "/console/reconciliations/{reconciliation_id}"
# last_run.counts' rows per side (the rest are matches per status)
ROWS_PER_SIDE = ("unmatched_left", "unmatched_right", "resolved_left", "resolved_right")
ROW_STATUSES = (MatchStatus.UNMATCHED, MatchStatus.RESOLVED)  # counted by rows per side
NOTICES = {
    "queued": "Run queued: it starts when a worker is free (its state below).",
    "saved": "Saved. A run with the new definition is queued.",
}
CHANGED_WARNING = (
    "The definition was changed since you opened this page (by another admin, or through "
    "the API). Your JSON is kept below: open the page in another tab to see theirs, or "
    "Save again to replace it."
)
# what the API answers for each (api/errors.py): the page answers the same
STATUS_OF = {InvalidBodyError: 422, DefinitionRejectedError: 400}


@router.get(PAGE)
def reconciliation_page(
    request: Request, user: SignedIn, reconciliation_id: int, done: str = ""
) -> Response:
    """Another workspace's reconciliation, or an id that is none, is the missing page."""
    summary = _summary(request, user, reconciliation_id)
    if summary is None:
        return not_found_page(request)
    text = json.dumps(summary.reconciliation.definition, indent=2)
    return _page(request, user, summary, text=text, notice=NOTICES.get(done))


@router.post(PAGE + "/run")
def run_now(request: Request, admin: AdminUser, reconciliation_id: int) -> Response:
    """A run due now, recorded in the history as asked for by the admin; 303 back."""
    try:
        runtime_of(request).reconciliations.queue_run(
            workspace_id=admin.workspace_id, reconciliation_id=reconciliation_id, actor=admin.name
        )
    except ReconciliationNotFoundError:
        return not_found_page(request)
    return see_other(PAGE.format(reconciliation_id=reconciliation_id) + "?done=queued")


@router.post(PAGE)
def save_definition(
    request: Request,
    admin: AdminUser,
    reconciliation_id: int,
    definition: Annotated[str, Form()] = "",
    base: Annotated[str, Form()] = "",
) -> Response:
    """The definition replaced by the JSON (recorded in the history with the admin's
    name), 303 to the page; its problems each by its field, the JSON kept (the API's
    status: 422, 400); a definition changed since the page was opened (`base`) is not
    overwritten (409), and a second Save replaces the one now shown."""
    summary = _summary(request, admin, reconciliation_id)
    if summary is None:
        return not_found_page(request)
    shown = summary.reconciliation.definition
    text = definition.replace("\r\n", "\n")
    try:
        if base != definition_digest(shown):
            raise ConflictError([FieldProblem(None, CHANGED_MEANWHILE)])
        runtime_of(request).reconciliations.replace(
            workspace_id=admin.workspace_id,
            derived_id=reconciliation_id,
            body=_parsed(text),
            expected=shown,
            actor=admin.name,
        )
    except ReconciliationNotFoundError:  # deleted meanwhile
        return not_found_page(request)
    except (DefinitionRejectedError, InvalidBodyError) as error:
        problems = [Problem(p.field, p.message, None) for p in error.problems]
        status = STATUS_OF[type(error)]
        return _page(
            request, admin, summary, text=text, base=base, problems=problems, status=status
        )
    except ConflictError:
        now = _summary(request, admin, reconciliation_id) or summary
        problems = [Problem(None, CHANGED_WARNING, None)]
        return _page(request, admin, now, text=text, problems=problems, status=409)
    return see_other(PAGE.format(reconciliation_id=reconciliation_id) + "?done=saved")


def _parsed(text: str) -> Any:
    """The textarea's JSON, or InvalidBodyError saying where it is not JSON (as the API
    answers a body that is not)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise InvalidBodyError([FieldProblem(None, f"not JSON: {error.msg} ({where})")]) from None


def _summary(request: Request, user: User, reconciliation_id: int) -> ReconciliationSummary | None:
    try:
        return runtime_of(request).reconciliation_summaries.get(
            workspace_id=user.workspace_id, reconciliation_id=reconciliation_id
        )
    except ReconciliationNotFoundError:
        return None


def _page(
    request: Request,
    user: User,
    summary: ReconciliationSummary,
    *,
    text: str,
    base: str | None = None,
    notice: str | None = None,
    problems: list[Problem] | None = None,
    status: int = 200,
) -> Response:
    counts = (summary.last_run or {}).get("counts") or {}
    return render(
        request,
        "reconciliation.html",
        user=user,
        status_code=status,
        title=summary.reconciliation.name,
        summary=summary,
        statuses=match_statuses(counts),
        amount_statuses=MATCHED_PER_STATUS,
        kinds=KIND_LABELS,
        kind_page=kind_page,
        definition_text=text,
        base=base or definition_digest(summary.reconciliation.definition),
        notice=notice,
        problems=problems or [],
    )


def match_statuses(counts: dict[str, int]) -> list[tuple[str, int]]:
    """The matches per status, the engine's statuses in their order, then any other the
    run counted (a status of a later version is shown, not dropped)."""
    known = [str(s) for s in MatchStatus if s not in ROW_STATUSES]
    others = sorted(k for k in counts if k not in known and k not in ROWS_PER_SIDE)
    return [(status, int(counts.get(status, 0))) for status in (*known, *others)]
