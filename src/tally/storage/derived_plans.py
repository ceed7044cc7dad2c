"""A derived run's plan, and the output table filled from it.

The plan (`r_{id}_plan`) has one row per output row: its row id `seq`, the values the run
computed, and the row ids of the input rows it shows (a `Layout` says which column comes
from where). A run writes it in batches (`write_plan`; on SQLite a whole run's plan lives
in a scratch file of its own, `plan_aside`), then `fill` builds `r_{id}_next` from it by
INSERT ... SELECT joins (on SQLite in short transactions), and an incremental run's few
rows go straight into the published output (`insert_planned`). What happens to the
tables after, publishing included, is derived_outputs.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from tally.core.columns import Column, ColumnType
from tally.storage import staging
from tally.storage.derived_outputs import BATCH_ROWS, Guard, copy_rows, next_table, plan_table
from tally.storage.engine import backend_of, job_step, write_connection, yield_to_writers
from tally.storage.resource_tables import ddl, row_json
from tally.storage.resources import table_name_for

# PostgreSQL fills a large output in this many sessions at once (_fill_in_sessions).
FILL_SESSIONS = 2
FILL_SESSIONS_FROM = 100_000  # rows: below, one statement is as quick


@dataclass(frozen=True)
class Part:
    """Where one output column's values come from: the plan's own value column `value`
    (its index among the plan's values), or column `physical` of the input row joined
    by the plan's row id `ref` (its index among the plan's references)."""

    value: int | None = None
    ref: int | None = None
    physical: str | None = None


@dataclass(frozen=True)
class Layout:
    """An output: its columns, each with its `Part`; the plan's value columns (types as
    stored: a decimal is an integer at its column's scale); the tables its references
    point into."""

    columns: tuple[Column, ...]
    parts: tuple[Part, ...]
    values: tuple[Column, ...]
    inputs: tuple[str, ...]


def write_plan(
    engine: Engine,
    resource_id: int,
    layout: Layout,
    rows: Iterable[Sequence[Any]],
    guard: Guard,
    *,
    scratch: Path | None = None,
) -> int:
    """The plan's rows, (seq, *values, *refs) each, in batches; how many were written.
    With `scratch` (SQLite, a whole run's plan): into that scratch file instead, in one
    transaction of its own: no write lock of the main database, nothing in its log, and
    gone when the file is deleted (`plan_aside`)."""
    table = plan_table(resource_id)
    postgresql = backend_of(engine).is_postgresql
    values = [
        f"v{i} {ddl.sql_type(_stored(c), postgresql=postgresql)}"
        for i, c in enumerate(layout.values)
    ]
    refs = [f"ref{i} BIGINT" for i in range(len(layout.inputs))]
    # PostgreSQL: no index on seq. A full run's fill joins the whole plan (hash joins)
    # and an incremental run's plan is a few rows, so an index served no read, and its
    # upkeep cost the COPY ~45 % more (300,000 plan rows: 0.80 s against 0.43 s). In
    # SQLite an INTEGER PRIMARY KEY is the rowid itself: free.
    seq = "seq BIGINT NOT NULL" if postgresql else "seq INTEGER PRIMARY KEY"
    create = f"({', '.join([seq, *values, *refs])})"
    insert = f"VALUES ({', '.join('?' * (1 + len(values) + len(refs)))})"
    iterator = iter(rows)
    written = 0
    if scratch is not None:
        # No guard here: it writes the main database, which would then stay locked for
        # the whole plan. A lost lease is found by the fill's first transaction.
        staged = f"{staging.STAGE_ALIAS}.{table}"
        with (
            engine.connect() as conn,
            staging.attached(conn, scratch, scratch=True),
            conn.begin(),
        ):
            conn.exec_driver_sql(f"CREATE TABLE {staged} {create}")
            cursor = _driver(conn).cursor()
            while batch := list(islice(iterator, BATCH_ROWS)):
                cursor.executemany(f"INSERT INTO {staged} {insert}", batch)
                written += len(batch)
        return written
    with write_connection(engine) as conn, conn.begin():
        guard(conn)
        conn.exec_driver_sql(f"CREATE TABLE {table} {create}")
    while batch := list(islice(iterator, BATCH_ROWS)):
        with job_step(engine) as conn:
            guard(conn)
            if postgresql:
                copy_rows(conn, table, batch)
            else:
                _driver(conn).cursor().executemany(f"INSERT INTO {table} {insert}", batch)
        written += len(batch)
    return written


def _driver(conn: Connection) -> Any:
    """The DB-API connection under `conn`: executemany of plain tuples, ~2x faster."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    return driver


@contextmanager
def plan_aside(engine: Engine, resource_id: int, staging_dir: Path) -> Iterator[Path | None]:
    """Where a whole run writes its plan (`write_plan`'s and `fill`'s `scratch`): on
    SQLite a scratch file of its own, deleted afterwards, whatever happens (a killed
    run's is removed by the output's next run); None on PostgreSQL (a table of the
    database, which its many writers share without waiting: `discard`ed after the fill).

    SQLite would otherwise write the plan's million rows through its log under the one
    write lock, then free its pages one by one: ~10 % of a 1M-row reconciliation's time
    until readable."""
    if not backend_of(engine).has_one_writer:
        yield None
        return
    path = staging.derived_scratch_path(staging_dir, resource_id)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def _stored(column: Column) -> Column:
    """A plan value's column as the plan stores it: a decimal as its scaled integer."""
    if column.type is ColumnType.DECIMAL:
        return Column(column.name, column.physical, ColumnType.INTEGER)
    return column


def fill(
    engine: Engine,
    resource_id: int,
    layout: Layout,
    row_count: int,
    guard: Guard,
    *,
    scratch: Path | None = None,
) -> None:
    """`r_{id}_next` filled from the plan (in `scratch` when given, see `write_plan`),
    its JSON text left to `finish`.

    SQLite: in transactions of `BATCH_ROWS` rows, each after the writers waiting for
    its one write lock (`yield_to_writers`). PostgreSQL: in one statement per session
    (`_fill_in_sessions`), its primary key added after (one index build instead of a
    row-by-row upkeep). Its row locks stop no other writer, and its planner joins a
    session's part of the plan to each input in one hash join; in many small batches,
    once autovacuum had analysed the plan table, it chose the same hash joins for every
    batch, scanning both inputs whole each time (1M pair: 27 s)."""
    table = next_table(resource_id)
    postgresql = backend_of(engine).is_postgresql
    plan = plan_table(resource_id)
    if scratch is not None:
        plan = f"{staging.STAGE_ALIAS}.{plan}"
    insert = _from_plan(table, plan, layout, postgresql=postgresql, with_json=False)
    with (
        write_connection(engine) as conn,
        staging.attached(conn, scratch) if scratch is not None else nullcontext(),
    ):
        with conn.begin():
            guard(conn)
            ddl.create_table(conn, table, layout.columns, primary_key=False, generated_ids=False)
        if postgresql:
            _fill_in_sessions(engine, conn, insert, row_count, guard)
            with conn.begin():
                guard(conn)
                ddl.add_primary_key(conn, table)
            return
        for low in range(1, row_count + 1, BATCH_ROWS):
            yield_to_writers(conn)
            with conn.begin():
                guard(conn)
                conn.execute(insert, {"low": low, "high": low + BATCH_ROWS})


def _fill_in_sessions(
    engine: Engine, conn: Connection, insert: Any, row_count: int, guard: Guard
) -> None:
    """PostgreSQL: the plan's rows in FILL_SESSIONS equal ranges, each one statement in
    a session of its own, at the same time (PostgreSQL runs no INSERT ... SELECT in
    parallel itself; a 1M-row output's fill is seconds of one core). Only `conn`'s
    transaction renews the lease (the renewal locks its row until commit: the others
    would wait for it); if it finds the lease lost, what the others wrote is in
    `r_{id}_next`, which the run that took over clears first."""
    step = -(-row_count // FILL_SESSIONS) if row_count else 1
    ranges = [(low, low + step) for low in range(1, row_count + 1, step)]
    if len(ranges) < 2 or row_count < FILL_SESSIONS_FROM:
        with conn.begin():
            guard(conn)
            conn.execute(insert, {"low": 1, "high": row_count + 1})
        return

    def fill_range(low: int, high: int) -> None:
        with write_connection(engine) as other, other.begin():
            other.execute(insert, {"low": low, "high": high})

    with ThreadPoolExecutor(len(ranges) - 1, thread_name_prefix="tally-fill") as pool:
        others = [pool.submit(fill_range, *bounds) for bounds in ranges[1:]]
        with conn.begin():
            guard(conn)
            conn.execute(insert, {"low": ranges[0][0], "high": ranges[0][1]})
        for other in others:
            other.result()


def insert_planned(conn: Connection, resource_id: int, layout: Layout, low: int, high: int) -> None:
    """In the caller's transaction: the plan's rows `low` <= seq < `high` inserted into
    the published output (an incremental run's few rows), with their JSON text; the
    output's indexes take them as any insert."""
    table = table_name_for(resource_id)
    postgresql = backend_of(conn).is_postgresql
    plan = plan_table(resource_id)
    insert = _from_plan(table, plan, layout, postgresql=postgresql, with_json=True)
    conn.execute(insert, {"low": low, "high": high})


def _from_plan(table: str, plan: str, layout: Layout, *, postgresql: bool, with_json: bool) -> Any:
    """INSERT INTO `table` the rows `:low` <= seq < `:high` of the plan `plan` joined to
    their input rows, with their JSON text if `with_json`."""
    joins = " ".join(
        f"LEFT JOIN {name} i{n} ON i{n}.{ddl.ROW_ID} = p.ref{n}"
        for n, name in enumerate(layout.inputs)
    )
    seq: sa.ColumnClause[Any] = sa.literal_column("p.seq")
    rows = (
        sa.select(
            seq.label(ddl.ROW_ID),
            *(
                sa.literal_column(_part_sql(part, column, postgresql)).label(column.physical)
                for part, column in zip(layout.parts, layout.columns, strict=True)
            ),
        )
        .select_from(sa.text(f"{plan} p {joins}"))
        .where(seq >= sa.bindparam("low"), seq < sa.bindparam("high"))
        .subquery("o")
    )
    names = [ddl.ROW_ID, *(c.physical for c in layout.columns)]
    values: list[sa.ColumnElement[Any]] = [sa.literal_column(f"o.{name}") for name in names]
    if with_json:
        names.append(ddl.ROW_JSON)
        values.append(row_json.row_text(layout.columns, "o.", postgresql=postgresql))
    rendered = sa.select(*values).select_from(rows)
    return sa.insert(sa.table(table, *(sa.column(n) for n in names))).from_select(names, rendered)


def _part_sql(part: Part, column: Column, postgresql: bool) -> str:
    if part.ref is not None:
        return f"i{part.ref}.{part.physical}"
    assert part.value is not None
    ref = f"p.v{part.value}"
    if postgresql and column.type is ColumnType.DECIMAL:
        exact = f"CAST({ref} AS NUMERIC) / 1{'0' * column.scale}"
        return f"CAST({exact} AS {ddl.sql_type(column, postgresql=True)})"
    return ref
