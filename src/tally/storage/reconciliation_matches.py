"""The matches of a reconciliation's output, a page at a time: which match ids a page of
the workbench shows (each match once, however many rows it has) and how many matches
there are, for statuses and a pass. The rows themselves are read by the Data API."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column
from tally.storage.resource_tables.ddl import row_table


def match_page(
    conn: Connection,
    table: str,
    *,
    match_id: Column,
    status: Column,
    pass_: Column,
    statuses: Sequence[str],
    pass_name: str | None,
    offset: int,
    limit: int,
) -> tuple[list[tuple[int, int]], int]:
    """The page's (match id, output rows) by match id, and the count of matches of these
    statuses (and this pass, when named) in the whole output."""
    source = row_table(table, [match_id, status, pass_])
    where: list[sa.ColumnElement[bool]] = [
        source.c[status.physical].in_(list(statuses)),
        source.c[match_id.physical].is_not(None),
    ]
    if pass_name is not None:
        where.append(source.c[pass_.physical] == pass_name)
    ids = source.c[match_id.physical]
    page = conn.execute(
        sa.select(ids, sa.func.count())
        .where(*where)
        .group_by(ids)
        .order_by(ids)
        .offset(offset)
        .limit(limit)
    )
    total = conn.execute(sa.select(sa.func.count(sa.distinct(ids))).where(*where)).scalar_one()
    return [(int(r[0]), int(r[1])) for r in page], int(total)
