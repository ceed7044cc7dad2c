"""The workbench's Matches view (issue #34, point 7): the output's matches, whole, 25 a
page, filtered by status (matched, matched_with_difference, manual: a manual match
keeps its difference in `difference`) and by pass in the URL; each with its pass,
difference, reason, and for a manual one who made it and their note (GET .../actions).

"Undo" is `ReconciliationService.undo` (DELETE .../matches/{match_id}) with the note and
the console user's name as the actor: a manual match is dissolved, an automatic one
rejected for good; the page says which before the analyst confirms. Neither changes
the output at once: it shows the match until the run the undo queued, marked here."""

from __future__ import annotations

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
    manual_actions,
    message_of,
    note_of,
    rejection_of,
    rejections,
    status_of,
    undone_manual,
    view_url,
)
from tally.console.workbench_groups import (
    BadPageError,
    GroupsPage,
    page_number,
    read_groups,
)
from tally.core.reconciliation import MANUAL_PASS_NAME, MatchStatus, ReconciliationDefinition
from tally.core.reconciliation_actions import ActionKind, ActionRecord
from tally.core.users import User
from tally.services.reconciliation.service import Reconciliation

router = APIRouter(include_in_schema=False)
VIEW = "/console/reconciliations/{reconciliation_id}/matches"
MATCHED = tuple(
    str(s) for s in (MatchStatus.MATCHED, MatchStatus.MATCHED_WITH_DIFFERENCE, MatchStatus.MANUAL)
)


class MatchesView:
    """The view's state, from its URL: status and pass filters (empty: any) and page."""

    def __init__(self, reconciliation: Reconciliation, status: str, pass_name: str, page: int):
        definition = ReconciliationDefinition.from_json(reconciliation.definition)
        self.passes = [p.name for p in definition.passes] + [MANUAL_PASS_NAME]
        if status and status not in MATCHED:
            raise BadPageError(f"unknown status {status!r}: one of {', '.join(MATCHED)}")
        if pass_name and pass_name not in self.passes:
            raise BadPageError(f"unknown pass {pass_name!r}: one of {', '.join(self.passes)}")
        self.reconciliation_id = reconciliation.id
        self.status, self.pass_name, self.page = status, pass_name, page

    def url(self, page: int | None = None, **done: object) -> str:
        path = VIEW.format(reconciliation_id=self.reconciliation_id)
        return view_url(
            path, status=self.status, **{"pass": self.pass_name}, page=page or self.page, **done
        )


@router.get(VIEW)
async def matches_page(request: Request, user: SignedIn, reconciliation_id: int) -> Response:
    reconciliation = await run_in_threadpool(find_reconciliation, request, user, reconciliation_id)
    if reconciliation is None:
        return await run_in_threadpool(not_found_page, request)
    given = request.query_params
    try:
        view = MatchesView(
            reconciliation, given.get("status", ""), given.get("pass", ""), page_number(request)
        )
    except BadPageError as error:
        fallback = MatchesView(reconciliation, "", "", 1)
        return await _view(request, user, reconciliation, fallback, error=str(error), status=400)
    undone = given.get("undone", "")
    done = (
        (int(undone), given.get("outcome", "")) if undone.isascii() and undone.isdigit() else None
    )
    return await _view(request, user, reconciliation, view, done=done)


async def _view(
    request: Request,
    user: User,
    reconciliation: Reconciliation,
    view: MatchesView,
    *,
    done: tuple[int, str] | None = None,
    error: str | None = None,
    failed: int | None = None,
    status: int = 200,
) -> Response:
    groups = None
    if status != 400:
        statuses = (view.status,) if view.status else MATCHED
        groups = await read_groups(
            request,
            user,
            reconciliation,
            statuses,
            pass_name=view.pass_name or None,
            page=view.page,
        )
    taken = await run_in_threadpool(
        runtime_of(request).reconciliations.actions,
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation.id,
    )
    export = {"status__in": view.status or ",".join(MATCHED), "ordering": "match_id"}
    if view.pass_name:
        export["pass"] = view.pass_name
    return await run_in_threadpool(
        render,
        request,
        "workbench_matches.html",
        user=user,
        status_code=status,
        title=f"Matches: {reconciliation.name}",
        reconciliation=reconciliation,
        view=view,
        statuses=MATCHED,
        groups=groups,
        made=_made(groups, taken),
        kind_of=kind_of,
        pending=_pending(groups, taken),
        done=done,
        error=error,
        failed=failed,
        can_act=can_act(user),
        export=f"/console/resources/{reconciliation.resource_id}/export.csv?{urlencode(export)}",
    )


def _made(groups: GroupsPage | None, taken: list[ActionRecord]) -> dict[int, ActionRecord]:
    """The action behind each manual match of the page (who, when, their note)."""
    manual = manual_actions(taken)
    return (
        {g.match_id: manual[g.match_id] for g in groups.groups if g.match_id in manual}
        if groups
        else {}
    )


def _pending(groups: GroupsPage | None, taken: list[ActionRecord]) -> dict[int, str]:
    """The page's matches undone already, which the output shows until the run the undo
    queued: what was done and by whom."""
    manual, undone, rejected = manual_actions(taken), undone_manual(taken), rejections(taken)
    pending = {}
    for group in groups.groups if groups else ():
        if group.status == MatchStatus.MANUAL and group.match_id not in manual:
            if group.match_id in undone:
                by = actor_of(undone[group.match_id], undo=True)
                pending[group.match_id] = (
                    f"Dissolved by {by}: its rows are shown unmatched after the next run."
                )
        elif (
            group.status != MatchStatus.MANUAL
            and (rejection := rejection_of(group, rejected)) is not None
        ):
            by = actor_of(rejection)
            pending[group.match_id] = (
                f"Rejected by {by}: its rows are shown unmatched after the next run."
            )
    return pending


def kind_of(action: ActionRecord) -> str:
    """How a manual match was made, in words."""
    return "Matched by hand" if action.kind is ActionKind.MATCH else "Suggestion confirmed"


@router.post(VIEW + "/{match_id}/undo")
async def undo_match(
    request: Request, user: AnalystUser, reconciliation_id: int, match_id: int
) -> Response:
    """A manual match dissolved or an automatic one rejected for good (the API's rules),
    then back to the view as it was (its filters and page)."""
    reconciliation = await run_in_threadpool(find_reconciliation, request, user, reconciliation_id)
    if reconciliation is None:
        return await run_in_threadpool(not_found_page, request)
    form = await request.form()
    try:
        view = MatchesView(
            reconciliation,
            str(form.get("status") or ""),
            str(form.get("pass") or ""),
            form_page(form.get("page")),
        )
    except BadPageError:
        view = MatchesView(reconciliation, "", "", 1)
    try:
        outcome = await run_in_threadpool(
            runtime_of(request).reconciliations.undo,
            workspace_id=user.workspace_id,
            reconciliation_id=reconciliation_id,
            match_id=match_id,
            note=note_of(str(form.get("note") or "")),
            actor=user.name,
        )
    except ACTION_ERRORS as error:
        message = f"Match {match_id}: {message_of(error)}"
        return await _view(
            request,
            user,
            reconciliation,
            view,
            error=message,
            failed=match_id,
            status=status_of(error),
        )
    return see_other(view.url(undone=match_id, outcome=outcome))
