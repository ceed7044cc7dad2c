"""The workbench's Resolved view (issue #34, point 6's list and its undo): the one-sided
resolutions in force, newest first, 25 a page, each with its side, reason code, note,
actor and time and its rows as the output shows them (amounts exact, by the Data API);
then the reopened ones apart (never deleted), their own pages.

"Reopen" is `ReconciliationService.reopen` (DELETE .../resolutions/{id}) with the note
and the console user's name: its rows are unmatched in the output at once (the same
transaction), their reasons given by the run it queues."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from tally.console.auth import SignedIn, runtime_of
from tally.console.pages import not_found_page, render
from tally.console.sign_in import see_other
from tally.console.workbench_actions import (
    ACTION_ERRORS,
    AnalystUser,
    can_act,
    find_reconciliation,
    form_page,
    message_of,
    note_of,
    status_of,
    view_url,
)
from tally.console.workbench_groups import (
    MATCHES_PER_PAGE,
    BadPageError,
    SideColumns,
    page_number,
    read_output,
    side_columns,
)
from tally.core.reconciliation import MatchStatus, ReconciliationDefinition, SideName
from tally.core.reconciliation_actions import ActionKind, ActionRecord
from tally.core.users import User
from tally.services.reconciliation.service import Reconciliation
from tally.services.workspace_rows import row_values

router = APIRouter(include_in_schema=False)
VIEW = "/console/reconciliations/{reconciliation_id}/resolved"
RESOLVED = str(MatchStatus.RESOLVED)


@router.get(VIEW)
async def resolved_page(request: Request, user: SignedIn, reconciliation_id: int) -> Response:
    reconciliation = await run_in_threadpool(find_reconciliation, request, user, reconciliation_id)
    if reconciliation is None:
        return await run_in_threadpool(not_found_page, request)
    try:
        pages = (page_number(request), page_number(request, "reopened_page"))
    except BadPageError as error:
        return await _view(request, user, reconciliation, (1, 1), error=str(error), status=400)
    given = request.query_params.get("reopened", "")
    done = int(given) if given.isascii() and given.isdigit() else None
    return await _view(request, user, reconciliation, pages, done=done)


@dataclass(frozen=True)
class ResolutionsPage:
    """A page of resolutions (newest first) and where it is among them all."""

    items: list[ActionRecord]
    page: int
    first: int
    last: int
    total: int
    last_page: int


def _paged(items: list[ActionRecord], page: int) -> ResolutionsPage:
    first = (page - 1) * MATCHES_PER_PAGE
    shown = items[first : first + MATCHES_PER_PAGE]
    last_page = max(1, -(-len(items) // MATCHES_PER_PAGE))
    return ResolutionsPage(shown, page, first + 1, first + len(shown), len(items), last_page)


async def _view(
    request: Request,
    user: User,
    reconciliation: Reconciliation,
    pages: tuple[int, int],
    *,
    done: int | None = None,
    error: str | None = None,
    failed: int | None = None,
    status: int = 200,
) -> Response:
    taken = await run_in_threadpool(
        runtime_of(request).reconciliations.actions,
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation.id,
    )
    resolutions = [a for a in reversed(taken) if a.kind is ActionKind.RESOLVE]
    in_force = _paged([a for a in resolutions if a.undone_at is None], pages[0])
    reopened = _paged([a for a in resolutions if a.undone_at is not None], pages[1])
    sides, rows = await _rows(request, user, reconciliation, in_force.items)
    path = VIEW.format(reconciliation_id=reconciliation.id)
    return await run_in_threadpool(
        render,
        request,
        "workbench_resolved.html",
        user=user,
        status_code=status,
        title=f"Resolved: {reconciliation.name}",
        reconciliation=reconciliation,
        in_force=in_force,
        reopened=reopened,
        sides=sides,
        rows=rows,
        pages=pages,
        page_link=lambda n: view_url(path, page=n, reopened_page=pages[1]),
        reopened_link=lambda n: view_url(path, page=pages[0], reopened_page=n),
        done=done,
        error=error,
        failed=failed,
        can_act=can_act(user),
        export=f"/console/resources/{reconciliation.resource_id}/export.csv?status={RESOLVED}",
    )


async def _rows(
    request: Request, user: User, reconciliation: Reconciliation, shown: list[ActionRecord]
) -> tuple[dict[str, SideColumns], dict[tuple[str, int], list[str | None]]]:
    """The page's resolved rows as the output shows them, one Data API request a side:
    each side's columns, and each row's values by (side, position)."""
    definition = ReconciliationDefinition.from_json(reconciliation.definition)
    sides: dict[str, SideColumns] = {}
    found: dict[tuple[str, int], list[str | None]] = {}
    for side in SideName:
        positions = sorted({r for a in shown if a.side is side for r in a.rows})
        if not positions:
            continue
        name = definition.side(side).name
        filters = [("status", RESOLVED), (f"{name}._row__in", ",".join(map(str, positions)))]
        page = await read_output(request, user, reconciliation.resource_id, filters, len(positions))
        columns = side_columns(definition, page.columns)[0 if side is SideName.LEFT else 1]
        sides[str(side)] = columns
        for row in page.rows:
            values = row_values(row, columns.names)
            if values[0] is not None:
                found[(str(side), int(values[0]))] = values
    return sides, found


@router.post(VIEW + "/{resolution_id}/reopen")
async def reopen(
    request: Request, user: AnalystUser, reconciliation_id: int, resolution_id: int
) -> Response:
    """The resolution undone, with the note; back to the view's pages."""
    reconciliation = await run_in_threadpool(find_reconciliation, request, user, reconciliation_id)
    if reconciliation is None:
        return await run_in_threadpool(not_found_page, request)
    form = await request.form()
    pages = (form_page(form.get("page")), form_page(form.get("reopened_page")))
    try:
        await run_in_threadpool(
            runtime_of(request).reconciliations.reopen,
            workspace_id=user.workspace_id,
            reconciliation_id=reconciliation_id,
            resolution_id=resolution_id,
            note=note_of(str(form.get("note") or "")),
            actor=user.name,
        )
    except ACTION_ERRORS as error:
        message = f"Resolution {resolution_id}: {message_of(error)}"
        return await _view(
            request,
            user,
            reconciliation,
            pages,
            error=message,
            failed=resolution_id,
            status=status_of(error),
        )
    path = VIEW.format(reconciliation_id=reconciliation_id)
    return see_other(view_url(path, page=pages[0], reopened_page=pages[1], reopened=resolution_id))
