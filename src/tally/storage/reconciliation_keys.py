"""A reconciliation's key table, `r_{id}_keys`: every input row's normalised key under
each distinct key signature of the definition's passes, indexed, so an incremental run
finds the rows that share a key with a late file's rows without reading every row
(decision 0016, incremental runs).

One row per input row: `pos` (a left row's position, or minus a right row's), the row's
`row_id` in its input, and `k0..kN`, its key under signature n (NULL: empty, matches
nothing). A full run builds it as `r_{id}_keys_next` once its output is readable and
indexed, and swaps it in by one short transaction; an incremental run appends its new
rows in its one patch transaction.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from tally.storage.derived.outputs import BATCH_ROWS, Guard, copy_rows, discard
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl
from tally.storage.resources import table_name_for

VALUES_PER_QUERY = 500  # keys or positions per IN list

KeyRow = tuple[Any, ...]  # (pos, row_id, k0, ..., kN)


def keys_table(resource_id: int) -> str:
    return f"{table_name_for(resource_id)}_keys"


def staged_table(resource_id: int) -> str:
    return f"{keys_table(resource_id)}_next"


def old_table(resource_id: int) -> str:
    return f"{keys_table(resource_id)}_old"


def tables(resource_id: int) -> tuple[str, ...]:
    """Every table of this module a reconciliation may leave (DELETE drops them all)."""
    return keys_table(resource_id), staged_table(resource_id), old_table(resource_id)


def drop_tables(conn: Connection, resource_id: int) -> None:
    """The reconciliation's key tables, with the reconciliation (in its transaction)."""
    for table in tables(resource_id):
        ddl.drop_table(conn, table)


def stage(
    engine: Engine, resource_id: int, width: int, rows: Iterable[KeyRow], guard: Guard
) -> None:
    """`r_{id}_keys_next` written in batches, then one index per key (apart from the
    published table's names: SQLite cannot rename an index)."""
    table = staged_table(resource_id)
    for name in (table, old_table(resource_id)):
        discard(engine, name, guard)
    with write_connection(engine) as conn, conn.begin():
        guard(conn)
        keys = ", ".join(f"k{n} TEXT" for n in range(width))
        # SQLite: INTEGER PRIMARY KEY is the rowid itself, no second index
        pos = "BIGINT" if backend_of(engine).is_postgresql else "INTEGER"
        conn.exec_driver_sql(
            f"CREATE TABLE {table} (pos {pos} PRIMARY KEY, row_id BIGINT NOT NULL"
            f"{', ' if keys else ''}{keys})"
        )
    iterator = iter(rows)
    while batch := list(islice(iterator, BATCH_ROWS)):
        with write_connection(engine) as conn, conn.begin():
            guard(conn)
            _insert(conn, table, width, batch)
    nonce = secrets.token_hex(4)
    for n in range(width):
        with write_connection(engine) as conn, conn.begin():
            guard(conn)
            conn.exec_driver_sql(f"CREATE INDEX ix_{table}_{nonce}_k{n} ON {table} (k{n})")
    if backend_of(engine).is_postgresql:  # statistics, or `k IN (...)` may scan it all
        with write_connection(engine) as conn, conn.begin():
            guard(conn)
            conn.exec_driver_sql(f"ANALYZE {table}")


def swap(conn: Connection, resource_id: int) -> None:
    """In the caller's short transaction: the staged key table replaces the published
    one (SQLite keeps the old one as `_old`, which `discard_old` drops in batches)."""
    table, staged = keys_table(resource_id), staged_table(resource_id)
    if backend_of(conn).is_postgresql:
        ddl.drop_table(conn, table)
    else:
        ddl.drop_table(conn, old_table(resource_id))
        if exists(conn, resource_id):
            conn.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {old_table(resource_id)}")
    conn.exec_driver_sql(f"ALTER TABLE {staged} RENAME TO {table}")
    if backend_of(conn).is_postgresql:
        conn.exec_driver_sql(f"ALTER INDEX {staged}_pkey RENAME TO {table}_pkey")


def discard_old(engine: Engine, resource_id: int, guard: Guard) -> None:
    discard(engine, old_table(resource_id), guard)


def exists(conn: Connection, resource_id: int) -> bool:
    return sa.inspect(conn).has_table(keys_table(resource_id))


def by_keys(conn: Connection, resource_id: int, n: int, values: Sequence[str]) -> list[KeyRow]:
    """The rows whose key under signature n is one of `values`."""
    return _select(conn, resource_id, f"k{n}", values)


def by_positions(conn: Connection, resource_id: int, positions: Sequence[int]) -> list[KeyRow]:
    """The rows at these `pos` values (left positions, minus right ones)."""
    return _select(conn, resource_id, "pos", positions)


def _select(conn: Connection, resource_id: int, column: str, values: Sequence[Any]) -> list[KeyRow]:
    table = sa.table(keys_table(resource_id), sa.column("pos"), sa.column(column))
    found: list[KeyRow] = []
    ordered = sorted(set(values))
    for start in range(0, len(ordered), VALUES_PER_QUERY):
        chunk = ordered[start : start + VALUES_PER_QUERY]
        stmt = sa.select(sa.text("*")).select_from(table).where(table.c[column].in_(chunk))
        found.extend(tuple(row) for row in conn.execute(stmt))
    return found


def append(conn: Connection, resource_id: int, width: int, rows: Sequence[KeyRow]) -> None:
    """New input rows' keys, in the caller's (patch) transaction."""
    if rows:
        _insert(conn, keys_table(resource_id), width, rows)


def _insert(conn: Connection, table: str, width: int, rows: Sequence[KeyRow]) -> None:
    if backend_of(conn).is_postgresql:
        copy_rows(conn, table, rows)
        return
    driver = conn.connection.dbapi_connection
    assert driver is not None
    marks = ", ".join("?" * (2 + width))
    cursor = driver.cursor()
    try:
        cursor.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    finally:
        cursor.close()
