"""The reads that find a reconciliation row's candidates (services/reconciliation/
candidates.py) by index, never by reading every row: the other side's positions sharing
a key (the key table's column of a chain, indexed), those nearest by amount (the
output's column of the other side's amount, indexed), and the output's rows showing
given positions (its `<side>._row`, indexed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column
from tally.storage.reconciliation_keys import keys_table
from tally.storage.resource_tables.ddl import ROW_ID, row_table


def positions_by_key(
    conn: Connection, resource_id: int, n: int, key: str, *, right: bool, limit: int
) -> list[int]:
    """Up to `limit` positions of one side (the right side's when `right`) whose key of
    chain n is `key`, lowest first."""
    table = sa.table(keys_table(resource_id), sa.column("pos"), sa.column(f"k{n}"))
    pos = table.c.pos
    stmt = sa.select(pos).where(table.c[f"k{n}"] == key)
    stmt = stmt.where(pos < 0).order_by(pos.desc()) if right else stmt.where(pos > 0).order_by(pos)
    return [abs(int(p)) for p in conn.execute(stmt.limit(limit)).scalars()]


def nearest_positions(
    conn: Connection, table: str, *, position: Column, column: Column, value: int, limit: int
) -> list[int]:
    """Up to `limit` positions either side of `value` (a stored value of `column`) in the
    output: the rows of one side (`position`, its `<side>._row`) nearest by that column."""
    source = row_table(table, [position, column])
    shown, compared = source.c[position.physical], source.c[column.physical]
    row_id = source.c[ROW_ID]
    # in the shape of the column's index, `(column NULLS FIRST, row id)` (ddl.py): read
    # forwards or backwards from the value, never sorted
    ways = (
        (compared >= value, (compared.asc().nulls_first(), row_id.asc())),
        (compared < value, (compared.desc().nulls_last(), row_id.desc())),
    )
    found: list[int] = []
    for where, order in ways:
        stmt = sa.select(shown).where(where, shown.is_not(None)).order_by(*order).limit(limit)
        found += [int(p) for p in conn.execute(stmt).scalars()]
    return found


@dataclass(frozen=True)
class Shown:
    """A position of one side as the output shows it: an output row holding it (the
    first, for a row in a one-to-many match), its status and match id."""

    row_id: int
    status: str
    match_id: int | None


def shown_at(
    conn: Connection,
    table: str,
    *,
    position: Column,
    status: Column,
    match_id: Column,
    positions: Sequence[int],
) -> dict[int, Shown]:
    """Each of these positions the output shows, by position."""
    if not positions:
        return {}
    source = row_table(table, [position, status, match_id])
    stmt = (
        sa.select(
            source.c[position.physical],
            source.c[ROW_ID],
            source.c[status.physical],
            source.c[match_id.physical],
        )
        .where(source.c[position.physical].in_(sorted(set(positions))))
        .order_by(source.c[ROW_ID])
    )
    found: dict[int, Shown] = {}
    for row in conn.execute(stmt):
        found.setdefault(int(row[0]), Shown(int(row[1]), str(row[2]), row[3]))
    return found
