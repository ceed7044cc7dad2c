"""A page of an output's matches for the workbench (suggestions, matches): the ids of
the page's matches, how many output rows they hold, and how many matches there are, so
a page is whole matches and its rows are read in one Data API request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from tally.services.reconciliation.output_columns import MATCH_ID, PASS, STATUS
from tally.storage import reconciliation_matches, resources
from tally.storage.derived.records import DerivedRecord


@dataclass(frozen=True)
class MatchPage:
    """`match_ids` in order; `rows`: the output rows they hold together; `total`: the
    matches of these statuses (and pass) in the whole output."""

    match_ids: tuple[int, ...]
    rows: int
    total: int


def match_page(
    conn: Connection,
    record: DerivedRecord,
    statuses: Sequence[str],
    *,
    pass_name: str | None,
    offset: int,
    limit: int,
) -> MatchPage:
    """No match for an output no run has built yet (it has no `status` column)."""
    output = resources.get_resource(conn, record.resource_id)
    by_name = {c.name: c for c in output.columns}
    if STATUS not in by_name:
        return MatchPage((), 0, 0)
    page, total = reconciliation_matches.match_page(
        conn,
        output.table_name,
        match_id=by_name[MATCH_ID],
        status=by_name[STATUS],
        pass_=by_name[PASS],
        statuses=statuses,
        pass_name=pass_name,
        offset=offset,
        limit=limit,
    )
    return MatchPage(tuple(m for m, _ in page), sum(n for _, n in page), total)
