"""A derived run's plan, and the output table filled from it.

The plan (`r_{id}_plan`) has one row per output row: its row id `seq`, the values the run
computed, and the row ids of the input rows it shows (a `Layout` says which column comes
from where). A whole run writes it in batches (`write_plan`), then builds
`r_{id}_next` from it by INSERT ... SELECT joins (`build`; on SQLite the plan lives in
scratch files and the output fills while it is written, `write_and_fill`), and an
incremental run's few rows go straight into the published output (`insert_planned`).
What happens to the tables after, publishing included, is outputs.py's.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import count, islice
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from tally.core.columns import Column, ColumnType
from tally.storage import staging
from tally.storage.derived.outputs import (
    BATCH_ROWS,
    Guard,
    copy_rows,
    discard,
    next_table,
    plan_table,
)
from tally.storage.engine import backend_of, job_step, write_connection, yield_to_writers
from tally.storage.resource_tables import ddl
from tally.storage.resources import table_name_for

# PostgreSQL fills a large output in this many sessions at once (_fill_in_sessions).
FILL_SESSIONS = 2
FILL_SESSIONS_FROM = 100_000  # rows: below, one statement is as quick
# SQLite: plan rows per scratch file when the plan is written while the output fills
# (`write_and_fill`): the fill waits for the first part only.
PART_ROWS = 200_000


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
    With `scratch` (SQLite, a part of a whole run's plan): into that scratch file
    instead, in one transaction of its own: no write lock of the main database, nothing
    in its log, and gone when the file is deleted (`write_and_fill`)."""
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


def _stored(column: Column) -> Column:
    """A plan value's column as the plan stores it: a decimal as its scaled integer."""
    if column.type is ColumnType.DECIMAL:
        return Column(column.name, column.physical, ColumnType.INTEGER)
    return column


def build(
    engine: Engine,
    resource_id: int,
    layout: Layout,
    rows: Iterable[Sequence[Any]],
    row_count: int,
    guard: Guard,
    staging_dir: Path,
) -> None:
    """A whole run's output: its plan written, `r_{id}_next` filled from it, the plan
    gone. SQLite: `write_and_fill` (the plan in scratch files, never through the main
    database's log under its one write lock, then freed page by page: ~10 % of a 1M-row
    reconciliation's time until readable). PostgreSQL: a table of the database, which
    its many writers share without waiting."""
    if backend_of(engine).has_one_writer:
        write_and_fill(engine, resource_id, layout, rows, guard, staging_dir)
        return
    write_plan(engine, resource_id, layout, rows, guard)
    _fill_postgresql(engine, resource_id, layout, row_count, guard)
    discard(engine, plan_table(resource_id), guard)


def _fill_postgresql(
    engine: Engine, resource_id: int, layout: Layout, row_count: int, guard: Guard
) -> None:
    """PostgreSQL: `r_{id}_next` filled from the plan in one statement per session
    (`_fill_in_sessions`), its primary key added after (one index build instead of a
    row-by-row upkeep). Its row locks stop no other writer, and its planner joins a
    session's part of the plan to each input in one hash join; in many small batches,
    once autovacuum had analysed the plan table, it chose the same hash joins for every
    batch, scanning both inputs whole each time (1M pair: 27 s)."""
    table = next_table(resource_id)
    insert = _from_plan(table, plan_table(resource_id), layout, postgresql=True)
    with write_connection(engine) as conn:
        _create_next(conn, table, layout, guard)
        _fill_in_sessions(engine, conn, insert, row_count, guard)
        with conn.begin():
            guard(conn)
            ddl.add_primary_key(conn, table)


def _create_next(conn: Connection, table: str, layout: Layout, guard: Guard) -> None:
    with conn.begin():
        guard(conn)
        ddl.create_table(conn, table, layout.columns, primary_key=False, generated_ids=False)


def _fill_range(conn: Connection, insert: Any, low: int, high: int, guard: Guard) -> None:
    """SQLite: the plan's rows `low` <= seq < `high` into the output, BATCH_ROWS a
    transaction, each after the writers waiting for its one write lock
    (`yield_to_writers`)."""
    for start in range(low, high, BATCH_ROWS):
        yield_to_writers(conn)
        with conn.begin():
            guard(conn)
            conn.execute(insert, {"low": start, "high": min(start + BATCH_ROWS, high)})


def write_and_fill(
    engine: Engine,
    resource_id: int,
    layout: Layout,
    rows: Iterable[Sequence[Any]],
    guard: Guard,
    staging_dir: Path,
) -> None:
    """SQLite: the plan written and `r_{id}_next` filled at once. A second thread writes
    the plan part by part (PART_ROWS rows), each into a scratch file of its own, while
    this one fills from the parts already written, then deletes them. Making the plan's
    rows is Python (it holds the GIL); the fill runs inside SQLite, which releases it:
    on two cores they overlap (1M pair: plan 3.4-5.3 s and fill 6.3-7.3 s one after the
    other). At most three parts are on disk at once. A killed run's parts are removed by
    the output's next run (`staging.derived_scratch_path`)."""
    table = next_table(resource_id)
    first = staging.derived_scratch_path(staging_dir, resource_id)
    parts: queue.Queue[tuple[Path, int, int] | None] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def write_parts() -> None:
        iterator, low = iter(rows), 1
        try:
            for number in count():
                part = list(islice(iterator, PART_ROWS))
                if not part or stop.is_set():
                    return
                path = first.with_name(f"{first.stem}-{number}.db")
                write_plan(engine, resource_id, layout, part, guard, scratch=path)
                parts.put((path, low, low + len(part)))
                low += len(part)
        finally:
            parts.put(None)

    plan = f"{staging.STAGE_ALIAS}.{plan_table(resource_id)}"
    insert = _from_plan(table, plan, layout, postgresql=False)
    with write_connection(engine) as conn, ThreadPoolExecutor(1, "tally-plan") as pool:
        _create_next(conn, table, layout, guard)  # before: the first part waits for no lock
        writing = pool.submit(write_parts)
        ended = False
        try:
            while (written := parts.get()) is not None:
                path, low, high = written
                with staging.attached(conn, path):
                    _fill_range(conn, insert, low, high, guard)
                path.unlink(missing_ok=True)
            ended = True
        finally:
            stop.set()
            while not ended:  # whatever failed here, the writer can end
                ended = parts.get() is None
            for left in first.parent.glob(f"{first.stem}-*.db"):
                left.unlink(missing_ok=True)
        writing.result()  # its error, if it failed


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
    the published output (an incremental run's few rows); the output's indexes take
    them as any insert."""
    table = table_name_for(resource_id)
    postgresql = backend_of(conn).is_postgresql
    plan = plan_table(resource_id)
    insert = _from_plan(table, plan, layout, postgresql=postgresql)
    conn.execute(insert, {"low": low, "high": high})


def _from_plan(table: str, plan: str, layout: Layout, *, postgresql: bool) -> Any:
    """INSERT INTO `table` the rows `:low` <= seq < `:high` of the plan `plan` joined to
    their input rows (no JSON text: outputs keep none, outputs.py)."""
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
