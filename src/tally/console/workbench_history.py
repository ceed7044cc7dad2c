"""The workbench's History view (issue #34, point 8): every action on a reconciliation
and every end of one (an undo, a retirement) as an entry of its own, newest first, with
time, actor, kind, rows, reason code and note; filtered by actor and kind, paged on the
server (the state in the URL); "Undo" where the API allows it (analysts: a manual match
dissolved, a resolution reopened) through the service the API's DELETEs use; and
"Export CSV" of the filtered history, whole and streamed."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response

from tally.console.auth import SignedIn, needs, runtime_of
from tally.console.pages import not_found_page, render
from tally.console.resource_table import csv_download
from tally.console.sign_in import see_other
from tally.core.errors import ConflictError, ReconciliationNotFoundError
from tally.core.reconciliation_actions import HISTORY_KINDS, HistoryFilter
from tally.core.users import Role, User

router = APIRouter(include_in_schema=False)
PAGE = "/console/reconciliations/{reconciliation_id}/history"
KIND_LABELS = {
    "match": "Manual match",
    "confirm": "Suggestion confirmed",
    "reject": "Match rejected",
    "resolve": "Resolved",
    "define": "Definition changed",
    "run": "Run asked for",
    "undo": "Undo",
    "retired": "Retired",
}
Analyst = Annotated[User, Depends(needs(Role.ANALYST))]
FormText = Annotated[str, Form()]


def state_query(actor: str, kind: str, page: int = 1) -> str:
    """The view's state as a query string (empty values left out), `?` first if any."""
    pairs = [("actor", actor), ("kind", kind)] + ([("page", str(page))] if page > 1 else [])
    kept = urlencode([(k, v) for k, v in pairs if v])
    return f"?{kept}" if kept else ""


@router.get(PAGE)
def history_page(
    request: Request,
    user: SignedIn,
    reconciliation_id: int,
    actor: str = "",
    kind: str = "",
    page: int = 1,
    undone: int | None = None,
) -> Response:
    """Every role reads it; a kind that is none of the history's is a 400 saying so."""
    return _page(request, user, reconciliation_id, actor, kind, page, undone=undone)


@router.get(PAGE + "/export.csv")
def history_csv(
    request: Request, user: SignedIn, reconciliation_id: int, actor: str = "", kind: str = ""
) -> Response:
    """The whole filtered history, streamed (a viewer may)."""
    if kind and kind not in HISTORY_KINDS:
        return _page(request, user, reconciliation_id, actor, kind, 1)
    service = runtime_of(request).reconciliations
    try:
        shown = service.get(workspace_id=user.workspace_id, derived_id=reconciliation_id)
        chunks = service.history_csv(
            workspace_id=user.workspace_id,
            reconciliation_id=reconciliation_id,
            chosen=HistoryFilter(actor or None, kind or None),
        )
    except ReconciliationNotFoundError:
        return not_found_page(request)
    return csv_download(chunks, f"{shown.name} history")


@router.post(PAGE + "/undo")
def undo_from_history(
    request: Request,
    analyst: Analyst,
    reconciliation_id: int,
    action_id: Annotated[int, Form()],
    note: FormText = "",
    actor: FormText = "",
    kind: FormText = "",
    page: Annotated[int, Form()] = 1,
) -> Response:
    """The action undone as the API's DELETE would (analysts and admins), 303 back to
    the view as it was; one that cannot be undone (now) is a 409 on the view, by its row."""
    try:
        runtime_of(request).reconciliations.undo_action(
            workspace_id=analyst.workspace_id,
            reconciliation_id=reconciliation_id,
            action_id=action_id,
            note=note.strip() or None,
            actor=analyst.name,
        )
    except ReconciliationNotFoundError:
        return not_found_page(request)
    except ConflictError as error:
        refused = (action_id, "; ".join(p.message for p in error.problems))
        return _page(
            request, analyst, reconciliation_id, actor, kind, page, refused=refused, status=409
        )
    query = state_query(actor, kind, page)
    joined = "&" if query else "?"
    return see_other(
        PAGE.format(reconciliation_id=reconciliation_id) + f"{query}{joined}undone={action_id}"
    )


def _page(
    request: Request,
    user: User,
    reconciliation_id: int,
    actor: str,
    kind: str,
    page: int,
    *,
    undone: int | None = None,
    refused: tuple[int, str] | None = None,
    status: int = 200,
) -> Response:
    service = runtime_of(request).reconciliations
    unknown = bool(kind) and kind not in HISTORY_KINDS
    chosen = HistoryFilter(actor or None, None if unknown else kind or None)
    try:
        shown = service.get(workspace_id=user.workspace_id, derived_id=reconciliation_id)
        found = service.history(
            workspace_id=user.workspace_id,
            reconciliation_id=reconciliation_id,
            chosen=chosen,
            page=page,
        )
    except ReconciliationNotFoundError:
        return not_found_page(request)
    base = PAGE.format(reconciliation_id=reconciliation_id)
    return render(
        request,
        "workbench_history.html",
        user=user,
        status_code=400 if unknown else status,
        title=f"{shown.name}: history",
        reconciliation=shown,
        history=found,
        actor=actor,
        kind=kind,
        unknown_kind=unknown,
        kinds=KIND_LABELS,
        sides=(shown.definition["left"]["name"], shown.definition["right"]["name"]),
        base=base,
        export_url=f"{base}/export.csv{state_query(actor, '' if unknown else kind)}",
        page_url=lambda n: base + state_query(actor, kind, n),
        can_act=user.role.allows(Role.ANALYST),
        undone=undone,
        refused=refused,
    )
