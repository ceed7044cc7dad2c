"""A source's rows removed (a file taken back) or replaced by a snapshot's (loaded into
a table of their own, swapped in), and found again: by their 1-based position in load
order (`_row_id` order, as reconciliation actions name them), by row id, by content.

Row ids are never given twice (`ddl.source_row_id`), so a row id names one row for
good, and a row that survives a removal keeps its id and its content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column
from tally.storage.engine import backend_of
from tally.storage.resource_tables.ddl import (
    FILE_ID,
    ROW_ID,
    create_table,
    drop_table,
    row_table,
)

# A row as found: its row id and its values in column order, in their stored form.
NumberedRow = tuple[int, tuple[Any, ...]]


def delete_file_rows(conn: Connection, table: str, file_id: int) -> int:
    """The rows file `file_id` inserted, by the index on `_file_id`; how many."""
    source = row_table(table, ())
    return int(conn.execute(sa.delete(source).where(source.c[FILE_ID] == file_id)).rowcount)


def replacement_table(table: str) -> str:
    """Where a snapshot's rows are loaded before they replace `table`'s."""
    return f"{table}_snapshot"


def replaced_table(table: str) -> str:
    """What `table` is called once a snapshot replaced it, until a worker drops it."""
    return f"{table}_replaced"


def create_replacement(conn: Connection, table: str, columns: Sequence[Column]) -> str:
    """In the caller's transaction: an empty table for a snapshot's rows, like a new
    source's (no per-column index yet), whose row ids go on after every id `table` ever
    gave; its name. Nothing reads it until `swap_in`."""
    fresh = replacement_table(table)
    drop_table(conn, fresh)  # none: one made by a load that failed rolled back with it
    create_table(conn, fresh, columns, file_ids=True)
    if backend_of(conn).is_postgresql:
        given = conn.exec_driver_sql(
            f"SELECT nextval(pg_get_serial_sequence('{table}', '{ROW_ID}'))"
        ).scalar_one()
        conn.exec_driver_sql(f"ALTER TABLE {fresh} ALTER COLUMN {ROW_ID} RESTART WITH {given}")
    else:
        given = conn.exec_driver_sql(
            f"SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0), "
            f"coalesce((SELECT max({ROW_ID}) FROM {table}), 0))",
            (table,),
        ).scalar_one()
        conn.exec_driver_sql(
            "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (fresh, int(given))
        )
    return fresh


def swap_in(conn: Connection, table: str, fresh: str) -> None:
    """In the caller's transaction, after the snapshot's rows are in `fresh`: `fresh`
    becomes `table`, and the old table `replaced_table(table)`, dropped by a worker after
    the commit (`ddl.drop_in_steps`): a DROP here would hold the lock while every page
    of a million rows is freed. Readers see the old table or the new, whole."""
    old = replaced_table(table)
    drop_table(conn, old)  # none, unless a worker has not dropped the last one yet
    conn.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {old}")
    conn.exec_driver_sql(f"ALTER TABLE {fresh} RENAME TO {table}")
    if backend_of(conn).is_postgresql:  # a primary key's index is named after its table
        conn.exec_driver_sql(f"ALTER INDEX IF EXISTS {table}_pkey RENAME TO {old}_pkey")
        conn.exec_driver_sql(f"ALTER INDEX {fresh}_pkey RENAME TO {table}_pkey")


IDS_PER_STATEMENT = 500  # row ids in one IN list


def rows_at(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    positions: Sequence[int],
    *,
    row_count: int | None = None,
) -> dict[int, NumberedRow]:
    """The rows at these 1-based positions (load order: `_row_id` order, whose values
    may have gaps), each with its row id, in their stored form (the same on both
    backends). Given the table's `row_count`, a table whose row ids have no gap (its
    last id minus its first is the count less one: every table only ever appended to)
    is read by its ids, an index step a row; else every row is numbered."""
    source = row_table(table, columns)
    if row_count is not None:
        dense = _dense_rows_at(conn, source, columns, positions, row_count)
        if dense is not None:
            return dense
    numbered = sa.select(
        sa.func.row_number().over(order_by=source.c[ROW_ID]).label("position"),
        source.c[ROW_ID],
        *(source.c[c.physical] for c in columns),
    ).subquery()
    wanted = sorted(set(positions))
    stmt = sa.select(numbered).where(numbered.c.position.in_(wanted)).order_by("position")
    return {int(row[0]): (int(row[1]), tuple(row[2:])) for row in conn.execute(stmt)}


def _dense_rows_at(
    conn: Connection,
    source: sa.TableClause,
    columns: Sequence[Column],
    positions: Sequence[int],
    row_count: int,
) -> dict[int, NumberedRow] | None:
    """The rows at these positions when the ids run without a gap (position p is the
    first id plus p - 1); None when they do not."""
    ids = source.c[ROW_ID]
    # two statements: SQLite reads one min() or max() from the index's end, never both
    first = conn.execute(sa.select(sa.func.min(ids))).scalar()
    last = conn.execute(sa.select(sa.func.max(ids))).scalar()
    if first is None or last - first + 1 != row_count:
        return None
    wanted = [first + p - 1 for p in sorted(set(positions)) if 1 <= p <= row_count]
    found: dict[int, NumberedRow] = {}
    for start in range(0, len(wanted), IDS_PER_STATEMENT):
        stmt = sa.select(ids, *(source.c[c.physical] for c in columns)).where(
            ids.in_(wanted[start : start + IDS_PER_STATEMENT])
        )
        for row in conn.execute(stmt):
            found[int(row[0]) - first + 1] = (int(row[0]), tuple(row[1:]))
    return found


def positions_of(conn: Connection, table: str, row_ids: Sequence[int]) -> dict[int, int]:
    """Each row id still in the table, and its 1-based position in load order."""
    source = row_table(table, ())
    found: dict[int, int] = {}
    for row_id in sorted(set(row_ids)):
        # the rows up to it, counted only when the last of them is the row itself
        count = conn.execute(
            sa.select(sa.func.count())
            .where(source.c[ROW_ID] <= row_id)
            .having(sa.func.max(source.c[ROW_ID]) == row_id)
        ).scalar()
        if count is not None:
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
            value *= 10 ** (column.scale - was.scale)  # a decimal's stored scaled integer
        conditions.append(source.c[column.physical] == value)
    stmt = sa.select(source.c[ROW_ID]).where(*conditions).order_by(source.c[ROW_ID])
    return [int(row[0]) for row in conn.execute(stmt)]
