"""The workbench's Exceptions view (issue #34, points 2-4): the unmatched rows of both
sides side by side, each with its amount, date, references, reason and age, sorted,
filtered and paged per side by the URL (exceptions_view.py); the Selection's sums and
difference; the candidates of one row (`?candidates=left:6`). Each side's page is read
as a Data API request on the reconciliation's output (`status=unmatched` and the side's
row given), with the reference search the console adds (`RowsRequest.contains`), by the
API's query runner: never more than a page of rows. The actions
(Match, Resolve) are workbench_exceptions_actions.py."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from tally.console.auth import SignedIn, runtime_of
from tally.console.exceptions_rows import (
    OpenRow,
    open_rows,
    output_scale,
    selection,
    side_fields,
)
from tally.console.exceptions_view import (
    PAGE_SIZE,
    BadExceptionsViewError,
    ExceptionsView,
    SideView,
    data_api_items,
    reference_columns,
    reference_contains,
)
from tally.console.pages import not_found_page, render
from tally.console.resource_table import RowsReader
from tally.core.clock import utc_now
from tally.core.errors import (
    ConflictError,
    InvalidRequestError,
    ReconciliationNotFoundError,
    RowNotFoundError,
)
from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.core.users import Role, User
from tally.services.reconciliation.candidates import Candidates
from tally.services.reconciliation.output_columns import ROW, amount_column
from tally.services.reconciliation.service import Reconciliation
from tally.services.workspace_rows import RowsRequest

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class SideTable:
    """One side's table: its name, view, rows (or the Data API's refusal) and links."""

    side: SideName
    name: str
    view: SideView
    references: list[str]
    has_amount_range: bool
    has_date: bool
    data_api_query: str
    export_query: str  # the side's export (exceptions_export.py): the side and the view
    contains: tuple[str, str] | None = None  # (column, text): the console's own search
    rows: list[OpenRow] = field(default_factory=list)
    total: int = 0
    error: str | None = None

    @property
    def first(self) -> int:
        return (self.view.page - 1) * PAGE_SIZE + 1

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1

    @property
    def last_page(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


@dataclass
class Outcome:
    """What an action left for the page: its problems by where they belong (`note`,
    `reason`, `rows`), the rows ticked, the note and reason as typed."""

    status_code: int = 200
    problems: dict[str, list[str]] = field(default_factory=dict)
    ticked: dict[SideName, list[int]] = field(default_factory=dict)
    note: str = ""
    reason: str = ""


@router.get("/console/reconciliations/{reconciliation_id}/exceptions")
async def exceptions_page(request: Request, user: SignedIn, reconciliation_id: int) -> Response:
    """Another workspace's reconciliation, or none, is the missing page."""
    return await page(request, user, reconciliation_id, request.query_params.multi_items())


async def page(
    request: Request,
    user: User,
    reconciliation_id: int,
    items: Sequence[tuple[str, str]],
    outcome: Outcome | None = None,
) -> Response:
    """The view of these parameters, with an action's outcome when it failed."""
    outcome = outcome or Outcome()
    runtime = runtime_of(request)
    try:
        shown = await run_in_threadpool(
            runtime.reconciliations.get,
            workspace_id=user.workspace_id,
            derived_id=reconciliation_id,
        )
    except ReconciliationNotFoundError:
        return await run_in_threadpool(not_found_page, request)
    definition = ReconciliationDefinition.from_json(shown.definition)
    outcome.problems = {k: [_named(m, definition) for m in v] for k, v in outcome.problems.items()}
    values: dict[str, Any] = {"view": None, "tables": [], "candidates": None, "view_error": None}
    try:
        view = ExceptionsView.of(items)
    except BadExceptionsViewError as refused:
        view, values["view_error"] = ExceptionsView.of([]), str(refused)
    values["view"] = view
    if values["view_error"] is None and shown.last_run is not None:
        await _fill(request, user, shown, definition, view, outcome, values)
    bad_view = values["view_error"] or any(t.error for t in values["tables"])
    status = outcome.status_code if outcome.status_code != 200 else (400 if bad_view else 200)
    return await run_in_threadpool(
        render,
        request,
        "workbench_exceptions.html",
        user=user,
        status_code=status,
        title=f"Exceptions: {shown.name}",
        reconciliation=shown,
        definition=definition,
        names={str(s): definition.side(s).name for s in SideName},
        can_act=user.role.allows(Role.ANALYST),
        outcome=outcome,
        done=done_message(request.query_params, definition),
        **values,
    )


async def _fill(
    request: Request,
    user: User,
    shown: Reconciliation,
    definition: ReconciliationDefinition,
    view: ExceptionsView,
    outcome: Outcome,
    values: dict[str, Any],
) -> None:
    """Both sides' pages, the open candidates, and the Selection of the ticked rows."""
    reader: RowsReader = request.app.state.queries
    today = utc_now().date()
    known = await run_in_threadpool(
        runtime_of(request).reconciliations.open_rows,
        workspace_id=user.workspace_id,
        reconciliation_id=shown.id,
    )
    tables = await asyncio.gather(
        *(_side(reader, user, shown, definition, view, which, today, known) for which in SideName)
    )
    values["tables"] = tables
    if view.candidates is not None:
        values["candidates"] = await _candidates(request, reader, user, shown, definition, view)
    picked = await _picked(reader, user, shown, definition, outcome.ticked, today)
    shown_rows = {(r.side, r.row) for t in tables for r in t.rows}
    if values["candidates"] is not None:
        shown_rows |= {(r.side, r.row) for r in values["candidates"].rows.values()}
    values["elsewhere"] = [r for r in picked if (r.side, r.row) not in shown_rows]
    output = await run_in_threadpool(
        runtime_of(request).listing.get,
        workspace_id=user.workspace_id,
        resource_id=shown.resource_id,
    )
    values["scale"] = scale = output_scale(output.columns)
    values["selection"] = selection(
        {w: [r.scaled for r in picked if r.side is w] for w in SideName}, scale
    )


async def _side(
    reader: RowsReader,
    user: User,
    shown: Reconciliation,
    definition: ReconciliationDefinition,
    view: ExceptionsView,
    which: SideName,
    today: dt.date,
    known: tuple[int, dict[str, int]] | None,
) -> SideTable:
    """One side's page; unfiltered, its count is the one last_run keeps (exact at the
    data version it names: the Data API counts only at any other)."""
    mine = view.side(which)
    side = definition.side(which)
    table = SideTable(
        side=which,
        name=side.name,
        view=mine,
        references=reference_columns(definition, which),
        has_amount_range=amount_column(side) is not None,
        has_date=side.date is not None,
        data_api_query="",
        export_query=urlencode([("side", str(which)), *view.items()]),
    )
    try:
        query = side_query(definition, which, mine)
        contains = reference_contains(definition, which, mine)
        total = None if known is None or mine.filtered() else (known[0], known[1][which])
        rows = await reader.read_rows(rows_request(user, shown, query, mine.page, total, contains))
    except (BadExceptionsViewError, InvalidRequestError) as refused:
        return dataclasses.replace(table, error=str(refused))
    return dataclasses.replace(
        table,
        data_api_query=urlencode(query),
        contains=contains,
        rows=open_rows(rows, definition, which, today),
        total=rows.total,
    )


def side_query(
    definition: ReconciliationDefinition, which: SideName, view: SideView
) -> list[tuple[str, str]]:
    """The side's Data API query (without its page) and the columns the view shows."""
    fields = ("fields", ",".join(side_fields(definition, which)))
    return [*data_api_items(definition, which, view), fields]


def rows_request(
    user: User,
    shown: Reconciliation,
    query: Sequence[tuple[str, str]],
    page: int = 1,
    known_total: tuple[int, int] | None = None,
    contains: tuple[str, str] | None = None,
) -> RowsRequest:
    """The query as the query runner (or the export) reads it, for the user."""
    given = dict(query)
    return RowsRequest(
        resource_id=shown.resource_id,
        workspace_id=user.workspace_id,
        filters=[(k, v) for k, v in query if k not in ("ordering", "fields")],
        fields=given.get("fields"),
        ordering=given.get("ordering"),
        page=page,
        page_size=PAGE_SIZE,
        known_total=known_total,
        contains=contains,
        by_indexes=True,  # the open rows' own indexes (and a few rows named by id)
    )


async def _rows_at(
    reader: RowsReader,
    user: User,
    shown: Reconciliation,
    definition: ReconciliationDefinition,
    which: SideName,
    rows: Sequence[int],
    today: dt.date,
) -> list[OpenRow]:
    """These rows of a side as the output shows them (any status), each once."""
    if not rows:
        return []
    name = definition.side(which).name
    query = [
        (f"{name}.{ROW}__in", ",".join(str(r) for r in sorted(set(rows)))),
        ("fields", ",".join(side_fields(definition, which))),
        ("ordering", f"{name}.{ROW}"),
    ]
    found: dict[int, OpenRow] = {}
    page_number = 1
    while True:  # (a row in a one-to-many match shows once per pair)
        got = await reader.read_rows(rows_request(user, shown, query, page_number))
        for row in open_rows(got, definition, which, today):
            found.setdefault(row.row, row)
        if page_number * PAGE_SIZE >= got.total:
            return list(found.values())
        page_number += 1


async def _picked(
    reader: RowsReader,
    user: User,
    shown: Reconciliation,
    definition: ReconciliationDefinition,
    ticked: Mapping[SideName, Sequence[int]],
    today: dt.date,
) -> list[OpenRow]:
    picked = []
    for which in SideName:
        picked += await _rows_at(
            reader, user, shown, definition, which, ticked.get(which, ()), today
        )
    return picked


@dataclass(frozen=True)
class CandidatesPanel:
    side: SideName
    row: int
    found: Candidates | None
    error: str | None
    rows: dict[tuple[SideName, int], OpenRow]  # the candidates' own rows, by side and row


async def _candidates(
    request: Request,
    reader: RowsReader,
    user: User,
    shown: Reconciliation,
    definition: ReconciliationDefinition,
    view: ExceptionsView,
) -> CandidatesPanel:
    """The row's candidates (the service GET .../rows/{side}/{row}/candidates calls), and
    each candidate's own row (its amount for the Selection)."""
    assert view.candidates is not None
    which, row = view.candidates
    try:
        found = await run_in_threadpool(
            runtime_of(request).reconciliations.candidates,
            workspace_id=user.workspace_id,
            reconciliation_id=shown.id,
            side=which,
            row=row,
        )
    except (RowNotFoundError, ConflictError) as refused:
        return CandidatesPanel(which, row, None, str(refused), {})
    other = SideName.RIGHT if which is SideName.LEFT else SideName.LEFT
    wanted = [c.row for p in found.passes for c in p.candidates]
    today = utc_now().date()
    rows = await _rows_at(reader, user, shown, definition, other, wanted, today)
    return CandidatesPanel(which, row, found, None, {(other, r.row): r for r in rows})


def done_message(query: Mapping[str, str], definition: ReconciliationDefinition) -> str | None:
    """What the last action did, from the URL it answered with (`matched=6:6,7:3`,
    `resolved=12:left:4,5`): only numbers and a side are read back, never text."""
    names = {s: definition.side(s).name for s in SideName}
    parts = query.get("matched", "").split(":")
    if len(parts) == 3 and all(_numbers(p) for p in parts):
        match_id, left, right = parts
        return (
            f"Matched {_rows_text(names[SideName.LEFT], left)} with "
            f"{_rows_text(names[SideName.RIGHT], right)} (match {match_id})."
        )
    parts = query.get("resolved", "").split(":")
    if len(parts) == 3 and _numbers(parts[0]) and parts[1] in names and _numbers(parts[2]):
        resolution_id, side, rows = parts
        return f"Resolved {_rows_text(names[SideName(side)], rows)} (resolution {resolution_id})."
    return None


def _named(message: str, definition: ReconciliationDefinition) -> str:
    """A service's `left row 6 ...` as the page names the row: `bank row 6 ...`."""
    for which in SideName:
        if message.startswith(f"{which} row "):
            return definition.side(which).name + message[len(str(which)) :]
    return message


def _numbers(text: str) -> bool:
    return all(p.isascii() and p.isdigit() for p in text.split(",")) and bool(text)


def _rows_text(name: str, rows: str) -> str:
    numbers = rows.split(",")
    return f"{name} {'row' if len(numbers) == 1 else 'rows'} {', '.join(numbers)}"
