"""A derived resource's output, rebuilt whole beside the published one and swapped in.

A run writes two tables of its own, neither read by anyone else: `r_{id}_plan` and
`r_{id}_next`, the output itself, filled from the plan (plans.py). `publish`
then replaces the output in one short transaction: readable from then on; the table
it replaced, kept as `r_{id}_old`, is `discard`ed after. `finish` then builds its
indexes, as after a source's load (decision 0010). An output keeps no row JSON text
(since 2026-11-30, decision 0011's "Later"): it is rewritten at every run, and pages
render its rows. SQLite has one writer: every step is a transaction of at most
`BATCH_ROWS` rows or one index, so deliveries wait a fraction of a second at most
(decision 0016). A worker killed half-way leaves only the two tables, dropped by the
next run, or a published output not yet indexed, finished by the next run: the
published output is never half-written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, cast

import psycopg
from sqlalchemy import Connection, Engine, update

from tally.core.columns import Column
from tally.storage import resources
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource, table_name_for
from tally.storage.schema import resources as resources_table

BATCH_ROWS = 50_000  # output rows written per transaction


def next_table(resource_id: int) -> str:
    return f"{table_name_for(resource_id)}_next"


def plan_table(resource_id: int) -> str:
    return f"{table_name_for(resource_id)}_plan"


Guard = Callable[[Connection], None]  # raises once the run is no longer this worker's


def old_table(resource_id: int) -> str:
    return f"{table_name_for(resource_id)}_old"


def clear(engine: Engine, resource_id: int, guard: Guard) -> None:
    """Discard what an earlier run of this output left (a killed worker's tables)."""
    for table in (old_table(resource_id), plan_table(resource_id), next_table(resource_id)):
        discard(engine, table, guard)


def _garbage(conn: Connection) -> None:
    """The guard of a table nobody writes any more (an output replaced): none needed."""


def discard(engine: Engine, table: str, guard: Guard = _garbage) -> None:
    """Drop a table nobody reads any more, a step at a time (`ddl.drop_in_steps`)."""
    ddl.drop_in_steps(engine, table, guard, batch_rows=BATCH_ROWS)


def drop(conn: Connection, table: str) -> None:
    """In the caller's transaction: drop a run's own small table (an incremental run's
    plan, dropped with the patch that read it)."""
    ddl.drop_table(conn, table)


def copy_rows(conn: Connection, table: str, batch: Sequence[Sequence[Any]]) -> None:
    """PostgreSQL: rows appended by COPY (the fast way to write many)."""
    driver = cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)
    with driver.cursor() as cursor, cursor.copy(f"COPY {table} FROM STDIN") as copy:
        for row in batch:
            copy.write_row(row)


def is_finished(resource: Resource) -> bool:
    """The published output has its indexes: `finish` has nothing to do."""
    return resource.indexed_version == resource.data_version


def finish(
    engine: Engine, resource_id: int, guard: Guard, partial: Sequence[ddl.PartialIndex] = ()
) -> None:
    """What a published output still lacks, as a source after its load (a run taken
    over after its swap resumes here): its indexes, one per column and the kind's
    `partial` ones."""
    with engine.connect() as conn:
        resource = resources.get_resource(conn, resource_id)
    _index(engine, resource, guard, partial)


def _index(
    engine: Engine, resource: Resource, guard: Guard, partial: Sequence[ddl.PartialIndex]
) -> None:
    """Index the published output as a source is indexed, if it is not yet
    (`CREATE INDEX IF NOT EXISTS`); on SQLite one index per transaction (each holds
    the one write lock), statistics at the end."""
    resource_id = resource.id
    if resource.indexed_version == resource.data_version:
        return
    table, columns = resource.table_name, resource.columns
    names = f"{table}_v{resource.data_version}"  # apart from the names of the table it replaced
    ddl.build_indexes_in_steps(engine, table, columns, names=names, guard=guard, partial=partial)
    ddl.vacuum(engine, table)
    with write_connection(engine) as conn, conn.begin():
        guard(conn)
        resources.record_indexed(conn, resource_id, resource.data_version)


def publish(
    conn: Connection,
    resource: Resource,
    columns: Sequence[Column],
    row_count: int,
    now: dt.datetime,
) -> int:
    """In the caller's (short) transaction: the staged output replaces the published
    one and the resource says so, with a new data version (returned): readers see the
    old output or the new, whole. The old table is kept as `r_{id}_old`, which the
    caller then `discard`s: a DROP here would keep the new table locked until the old
    one's files were deleted at commit (PostgreSQL: 2.7 s at 1M rows, every reader of
    the output waiting) or its pages freed (SQLite: tens of seconds)."""
    table, staged, old = resource.table_name, next_table(resource.id), old_table(resource.id)
    postgresql = backend_of(conn).is_postgresql
    ddl.drop_table(conn, old)  # none, but for a run racing this
    conn.exec_driver_sql(f"ALTER TABLE {table} RENAME TO {old}")
    conn.exec_driver_sql(f"ALTER TABLE {staged} RENAME TO {table}")
    if postgresql:  # a primary key's index is named after its table
        conn.exec_driver_sql(f"ALTER INDEX IF EXISTS {table}_pkey RENAME TO {old}_pkey")
        conn.exec_driver_sql(f"ALTER INDEX {staged}_pkey RENAME TO {table}_pkey")
    version = resource.data_version + 1
    conn.execute(
        update(resources_table)
        .where(resources_table.c.id == resource.id)
        .values(
            columns=[c.to_json() for c in columns],
            is_placeholder=False,
            row_count=row_count,
            data_version=version,
            rendered_version=version,  # no row text kept: every row is as it should be
            updated_at=now,
        )
    )
    return version


def republish(conn: Connection, resource: Resource, row_count: int, now: dt.datetime) -> int:
    """In the caller's transaction, after rows of the published output were replaced in
    place (an incremental run): its new row count and data version (returned). The
    statements that replaced them kept the indexes up, so the output is as indexed as it
    was: what `finish` had not done yet it still does."""
    version = resource.data_version + 1
    was_indexed = resource.indexed_version == resource.data_version
    indexed = {"indexed_version": version} if was_indexed else {}
    conn.execute(
        update(resources_table)
        .where(resources_table.c.id == resource.id)
        .values(
            row_count=row_count,
            data_version=version,
            rendered_version=version,
            updated_at=now,
            **indexed,
        )
    )
    return version
