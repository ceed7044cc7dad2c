"""What the workbench's match views (suggestions, matches, resolved) share: a
reconciliation's output rows grouped by match, each side's rows beside the other's,
their values exactly as the Data API gives them (`read_rows`, the resource table's
reader); the columns an analyst compares (position, keys, date, amounts, currency);
the view's page in its URL; the notes the actions take; and who did what (GET
.../actions).

The page's matches come whole from `ReconciliationService.match_page` (their ids and
count), then their rows from one Data API request."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from tally.console.auth import runtime_of
from tally.console.resource_table import NUMERIC, RowsReader
from tally.core.columns import Column
from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.core.users import User
from tally.services.reconciliation.service import Reconciliation
from tally.services.workspace_rows import RowsPage, RowsRequest, row_values

MATCHES_PER_PAGE = 25
MATCH_FIELDS = ("match_id", "status", "pass", "difference", "reason")
ROW = "_row"


class BadPageError(Exception):
    """A view's URL the page cannot show (a page that is not a number, an unknown
    status or pass): the page answered 400 with this message."""


@dataclass(frozen=True)
class SideColumns:
    """The output's columns of one side an analyst compares: (name, label, numeric)."""

    side: SideName
    name: str  # the side's name in the definition (`bank`)
    columns: tuple[tuple[str, str, bool], ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _, _ in self.columns]


@dataclass
class MatchGroup:
    """One match: its own columns, and its rows, the i-th left row beside the i-th
    right row (None where one side has fewer)."""

    match_id: int
    status: str | None
    pass_name: str | None
    difference: str | None
    reason: str | None
    left: list[list[str | None]] = field(default_factory=list)
    right: list[list[str | None]] = field(default_factory=list)

    @property
    def lines(self) -> list[tuple[list[str | None] | None, list[str | None] | None]]:
        return list(itertools.zip_longest(self.left, self.right))

    def rows(self, side: SideName) -> list[int]:
        """The positions of the side's rows (each row's first value is its `_row`)."""
        return [int(r[0]) for r in (self.left if side is SideName.LEFT else self.right) if r[0]]


@dataclass(frozen=True)
class GroupsPage:
    groups: list[MatchGroup]
    sides: tuple[SideColumns, SideColumns]
    page: int
    first: int
    last: int
    total: int
    last_page: int


def page_number(request: Request, name: str = "page") -> int:
    """The URL's page (1 when absent); BadPageError for anything but a positive number."""
    given = request.query_params.get(name, "1")
    if not (given.isascii() and given.isdigit()) or int(given) < 1:
        raise BadPageError(f"'{name}' must be a positive whole number, not {given!r}")
    return int(given)


def side_columns(
    definition: ReconciliationDefinition, output: Sequence[Column]
) -> tuple[SideColumns, SideColumns]:
    """Per side: its `_row`, the keys its passes compare, its date, amounts and currency,
    those the output has, in that order."""
    types = {c.name: c.type in NUMERIC for c in output}
    shown = []
    for side in SideName:
        named = definition.side(side)
        keys = [str(getattr(k, side)) for p in definition.passes for k in p.keys]
        wanted = [ROW, *keys, named.date, *named.amount_columns(), named.currency]
        names = dict.fromkeys(f"{named.name}.{c}" for c in wanted if c)
        columns = tuple(
            (name, name.removeprefix(f"{named.name}."), types[name])
            for name in names
            if name in types
        )
        shown.append(SideColumns(side, named.name, columns))
    return shown[0], shown[1]


async def read_groups(
    request: Request,
    user: User,
    reconciliation: Reconciliation,
    statuses: Sequence[str],
    *,
    pass_name: str | None = None,
    page: int,
) -> GroupsPage:
    """The page's matches of these statuses (and pass), each whole, by match id."""
    service = runtime_of(request).reconciliations
    found = await run_in_threadpool(
        service.match_page,
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation.id,
        statuses=statuses,
        pass_name=pass_name,
        offset=(page - 1) * MATCHES_PER_PAGE,
        limit=MATCHES_PER_PAGE,
    )
    definition = ReconciliationDefinition.from_json(reconciliation.definition)
    groups: list[MatchGroup] = []
    sides: tuple[SideColumns, SideColumns] | None = None
    filters = [("status__in", ",".join(statuses))]
    if found.match_ids:
        filters.append(("match_id__in", ",".join(map(str, found.match_ids))))
    if pass_name is not None:
        filters.append(("pass", pass_name))
    rows = await read_output(request, user, reconciliation.resource_id, filters, max(found.rows, 1))
    sides = side_columns(definition, rows.columns)
    if found.match_ids:
        groups = _grouped(rows.rows, sides)
    first = (page - 1) * MATCHES_PER_PAGE
    return GroupsPage(
        groups,
        sides,
        page,
        first + 1,
        first + len(groups),
        found.total,
        max(1, -(-found.total // MATCHES_PER_PAGE)),
    )


async def read_side_rows(
    request: Request,
    user: User,
    reconciliation: Reconciliation,
    side: SideColumns,
    filters: Sequence[tuple[str, str]],
    rows: int,
) -> dict[int, list[str | None]]:
    """The output's rows of one side under these filters (at most `rows` of them), by
    their position in that side, as the side's columns' values."""
    if not rows:
        return {}
    page = await read_output(request, user, reconciliation.resource_id, filters, rows)
    found: dict[int, list[str | None]] = {}
    for row in page.rows:
        values = row_values(row, side.names)
        if values[0] is not None:
            found.setdefault(int(values[0]), values)
    return found


async def read_output(
    request: Request,
    user: User,
    output_id: int,
    filters: Sequence[tuple[str, str]],
    rows: int,
) -> RowsPage:
    reader: RowsReader = request.app.state.queries
    return await reader.read_rows(
        RowsRequest(
            resource_id=output_id,
            workspace_id=user.workspace_id,
            filters=filters,
            fields=None,
            ordering="match_id",
            page=1,
            page_size=rows,
        )
    )


def _grouped(rows: Iterable[str], sides: tuple[SideColumns, SideColumns]) -> list[MatchGroup]:
    """Output rows (ordered by match id) as matches; a side's row shown once however
    many of the match's rows repeat it (one-to-many)."""
    left, right = sides
    names = [*MATCH_FIELDS, *left.names, *right.names]
    groups: dict[int, MatchGroup] = {}
    seen: set[tuple[int, SideName, str | None]] = set()
    for row in rows:
        values = row_values(row, names)
        match_id, status, pass_name, difference, reason = values[: len(MATCH_FIELDS)]
        if match_id is None:
            continue
        group = groups.setdefault(
            int(match_id), MatchGroup(int(match_id), status, pass_name, difference, reason)
        )
        start = len(MATCH_FIELDS)
        for side, width, kept in (
            (left, len(left.names), group.left),
            (right, len(right.names), group.right),
        ):
            part = values[start : start + width]
            start += width
            if part and part[0] is not None and (group.match_id, side.side, part[0]) not in seen:
                seen.add((group.match_id, side.side, part[0]))
                kept.append(part)
    return list(groups.values())
