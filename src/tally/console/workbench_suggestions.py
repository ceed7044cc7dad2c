"""The workbench's Suggestions view (issue #34, point 5): the output's suggested matches,
whole, 25 a page, each with both sides' rows, its pass, reason and difference as the
Data API gives them; "Confirm" and "Reject" each, and for the matches selected.

Confirm is `ReconciliationService.confirm` (POST .../matches/{match_id}/confirm), reject
is `undo` (DELETE .../matches/{match_id}), the console user's name as the actor. Neither
changes the output at once: the output shows the match suggested until the run the
action queued, so until then the page marks it confirmed or rejected (from the actions
in force) and says so. "Confirm selected" and "Reject selected" act on each match in
turn: a refusal names its match, the others are done all the same."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from tally.console.auth import SignedIn, runtime_of
from tally.console.pages import not_found_page, render
from tally.console.sign_in import see_other
from tally.console.workbench_actions import (
    ACTION_ERRORS,
    AnalystUser,
    actor_of,
    can_act,
    find_reconciliation,
    form_page,
    ids_of,
    manual_actions,
    message_of,
    note_of,
    rejection_of,
    rejections,
    status_of,
    view_url,
)
from tally.console.workbench_groups import (
    BadPageError,
    GroupsPage,
    page_number,
    read_groups,
)
from tally.core.reconciliation import MatchStatus
from tally.core.reconciliation_actions import ActionRecord
from tally.core.users import User
from tally.services.reconciliation.service import Reconciliation

router = APIRouter(include_in_schema=False)
VIEW = "/console/reconciliations/{reconciliation_id}/suggestions"
SUGGESTED = (str(MatchStatus.SUGGESTED),)
# What an action did: a rejection of a confirmation still waiting for its run undoes
# the confirmation (the API's DELETE on a manual match): `dissolved`, said so.
OUTCOMES = ("confirmed", "rejected", "dissolved")


@router.get(VIEW)
async def suggestions_page(request: Request, user: SignedIn, reconciliation_id: int) -> Response:
    reconciliation = await run_in_threadpool(find_reconciliation, request, user, reconciliation_id)
    if reconciliation is None:
        return await run_in_threadpool(not_found_page, request)
    try:
        page = page_number(request)
    except BadPageError as error:
        return await _view(request, user, reconciliation, 1, error=str(error), status_code=400)
    done = {k: ids_of(request.query_params.get(k, "")) for k in OUTCOMES}
    return await _view(request, user, reconciliation, page, done=done)


async def _view(
    request: Request,
    user: User,
    reconciliation: Reconciliation,
    page: int,
    *,
    done: dict[str, list[int]] | None = None,
    error: str | None = None,
    failed: Sequence[int] = (),
    status_code: int = 200,
) -> Response:
    groups = None
    if status_code != 400:
        groups = await read_groups(request, user, reconciliation, SUGGESTED, page=page)
    taken = await run_in_threadpool(
        runtime_of(request).reconciliations.actions,
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation.id,
    )
    return await run_in_threadpool(
        render,
        request,
        "workbench_suggestions.html",
        user=user,
        status_code=status_code,
        title=f"Suggestions: {reconciliation.name}",
        reconciliation=reconciliation,
        groups=groups,
        pending=_pending(groups, taken),
        page_link=lambda n: _url(reconciliation.id, n),
        done=done or {},
        error=error,
        failed=set(failed),
        can_act=can_act(user),
        page=page,
        export=f"/console/resources/{reconciliation.resource_id}/export.csv?"
        + urlencode({"status": "suggested", "ordering": "match_id"}),
    )


def _pending(groups: GroupsPage | None, taken: list[ActionRecord]) -> dict[int, str]:
    """The page's matches an action in force has settled, which the output shows
    suggested until the run it queued: what was done and by whom."""
    confirmed, rejected = manual_actions(taken), rejections(taken)
    pending = {}
    for group in groups.groups if groups else ():
        if group.match_id in confirmed:
            by = actor_of(confirmed[group.match_id])
            pending[group.match_id] = f"Confirmed by {by}: shown as manual after the next run."
        elif (rejection := rejection_of(group, rejected)) is not None:
            by = actor_of(rejection)
            pending[group.match_id] = (
                f"Rejected by {by}: its rows are shown unmatched after the next run."
            )
    return pending


def _url(reconciliation_id: int, page: int, **done: Sequence[int]) -> str:
    """The view's URL at this page (with what was just done, for its message)."""
    return view_url(VIEW.format(reconciliation_id=reconciliation_id), page=page, **done)


def _act(
    request: Request, user: User, reconciliation_id: int, match_id: int, verb: str, note: str | None
) -> str:
    """One match confirmed or rejected, as the API's routes do it; what was done."""
    service = runtime_of(request).reconciliations
    if verb == "confirm":
        service.confirm(
            workspace_id=user.workspace_id,
            reconciliation_id=reconciliation_id,
            match_id=match_id,
            note=note,
            actor=user.name,
        )
        return "confirmed"
    return service.undo(
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation_id,
        match_id=match_id,
        note=note,
        actor=user.name,
    )


@router.post(VIEW + "/selected/{verb}")
async def act_on_selected(
    request: Request, user: AnalystUser, reconciliation_id: int, verb: str
) -> Response:
    """Each selected match in turn (`match` fields): a refusal names its match, the
    others are done; the page says which."""
    form = await request.form()
    chosen = [int(v) for v in form.getlist("match") if isinstance(v, str) and v.isdigit()]
    return await _act_on(request, user, reconciliation_id, chosen, verb, selected=True)


@router.post(VIEW + "/{match_id}/{verb}")
async def act_on_one(
    request: Request, user: AnalystUser, reconciliation_id: int, match_id: int, verb: str
) -> Response:
    """Confirm or reject one suggested match (`verb`), then back to the view's page."""
    return await _act_on(request, user, reconciliation_id, [match_id], verb)


async def _act_on(
    request: Request,
    user: User,
    reconciliation_id: int,
    match_ids: list[int],
    verb: str,
    *,
    selected: bool = False,
) -> Response:
    reconciliation = await run_in_threadpool(find_reconciliation, request, user, reconciliation_id)
    if reconciliation is None or verb not in ("confirm", "reject"):
        return await run_in_threadpool(not_found_page, request)
    form = await request.form()
    page = form_page(form.get("page"))
    if not match_ids:
        return await _view(
            request, user, reconciliation, page, error="Select at least one match.", status_code=400
        )
    done: dict[str, list[int]] = {k: [] for k in OUTCOMES}
    refused: list[tuple[int, Exception]] = []
    for match_id in match_ids:
        try:
            note = note_of(str(form.get("note") or ""))
            outcome = await run_in_threadpool(
                _act, request, user, reconciliation_id, match_id, verb, note
            )
            done[outcome].append(match_id)
        except ACTION_ERRORS as error:
            refused.append((match_id, error))
    if not refused:
        return see_other(_url(reconciliation_id, page, **done))
    lines = [f"Match {m}: {message_of(e)}" for m, e in refused]
    if selected:
        past = "confirmed" if verb == "confirm" else "rejected"
        others = [m for ids in done.values() for m in ids]
        lines.append(
            f"The others were {past}: {', '.join(map(str, others))}."
            if others
            else f"None was {past}."
        )
    return await _view(
        request,
        user,
        reconciliation,
        page,
        done=done,
        error=" ".join(lines),
        failed=[m for m, _ in refused],
        status_code=status_of(refused[0][1]),
    )
