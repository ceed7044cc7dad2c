"""A source's rows removed (a snapshot replaced, a file taken back) and found again:
by their 1-based position in load order (`_row_id` order, as reconciliation actions name
them), by row id, and by content.

Row ids are never given twice (`ddl.source_row_id`), so a row id names one row for
good, and a row that survives a removal keeps its id and its content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column
from tally.storage.resource_tables.ddl import FILE_ID, ROW_ID, row_table

# A row as found: its row id and its values in column order, in their stored form.
NumberedRow = tuple[int, tuple[Any, ...]]


def delete_rows(conn: Connection, table: str, *, file_id: int | None = None) -> int:
    """Every row (`file_id` None), or the rows that file inserted; how many."""
    source = row_table(table, ())
    stmt = sa.delete(source)
    if file_id is not None:
        stmt = stmt.where(source.c[FILE_ID] == file_id)
    return int(conn.execute(stmt).rowcount)


def rows_at(
    conn: Connection, table: str, columns: Sequence[Column], positions: Sequence[int]
) -> dict[int, NumberedRow]:
    """The rows at these 1-based positions (load order: `_row_id` order, whose values
    have gaps), each with its row id, in their stored form (the same on both backends)."""
    source = row_table(table, columns)
    numbered = sa.select(
        sa.func.row_number().over(order_by=source.c[ROW_ID]).label("position"),
        source.c[ROW_ID],
        *(source.c[c.physical] for c in columns),
    ).subquery()
    wanted = sorted(set(positions))
    stmt = sa.select(numbered).where(numbered.c.position.in_(wanted)).order_by("position")
    return {int(row[0]): (int(row[1]), tuple(row[2:])) for row in conn.execute(stmt)}


def positions_of(conn: Connection, table: str, row_ids: Sequence[int]) -> dict[int, int]:
    """Each row id still in the table, and its 1-based position in load order."""
    source = row_table(table, ())
    found: dict[int, int] = {}
    for row_id in sorted(set(row_ids)):
        count = conn.execute(
            sa.select(sa.func.count()).select_from(source).where(source.c[ROW_ID] <= row_id)
        ).scalar_one()
        exists = conn.execute(sa.select(source.c[ROW_ID]).where(source.c[ROW_ID] == row_id)).first()
        if exists is not None:
            found[row_id] = int(count)
    return found


def row_ids_holding(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    read_with: Sequence[Column],
    values: Sequence[Any],
) -> list[int]:
    """The ids of the rows holding exactly these values, in load order: `values` as
    `rows_at` read them with the columns `read_with` (a load since may have widened a
    decimal, whose stored integer then has more digits on SQLite). An equality on each
    column, so the column's index serves."""
    source = row_table(table, columns)
    stored = {c.physical: c for c in read_with}
    conditions = []
    for column, value in zip(columns, values, strict=True):
        if value is None:
            conditions.append(source.c[column.physical].is_(None))
            continue
        was = stored.get(column.physical)
        if isinstance(value, int) and not isinstance(value, bool) and was is not None:
            value *= 10 ** (column.scale - was.scale)  # SQLite's scaled integer
        conditions.append(source.c[column.physical] == value)
    stmt = sa.select(source.c[ROW_ID]).where(*conditions).order_by(source.c[ROW_ID])
    return [int(row[0]) for row in conn.execute(stmt)]
