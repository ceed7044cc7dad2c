"""The row tables' layout and DDL: create, widen, drop and index a resource's table, and
the table as the queries of the sibling modules see it (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from tally.core.columns import Column, ColumnType
from tally.storage.engine import (
    autocommit_connection,
    backend_of,
    job_step,
    not_pooled,
    write_connection,
)
from tally.storage.resource_tables.stored_types import bind_type

ROW_ID = "_row_id"
ROW_JSON = "_json"  # the row's JSON object text, or NULL (see the package docstring)
# A source's rows: the id of the file whose delivery inserted the row (see the package
# docstring). On PostgreSQL its DEFAULT reads the transaction's `tally.file_id`
# setting (`set_file_id`), so COPY, which takes no constants, fills it as it goes.
FILE_ID = "_file_id"
FILE_ID_SETTING = "tally.file_id"
_PG_FILE_ID_DEFAULT = f"NULLIF(current_setting('{FILE_ID_SETTING}', true), '')::bigint"
SQLITE_INDEX_SORT_KIB = 2000  # page cache (hence sort memory) while building indexes
PG_INDEX_SESSIONS = 2  # sessions building one table's indexes side by side
PG_INDEX_SORT_MEMORY = "16MB"  # maintenance_work_mem of each
# Digits of a PostgreSQL decimal column: more than any value within int64 at its scale
# has (the loader's bound), so the type never refuses what the loader accepts.
PG_NUMERIC_PRECISION = 38


def sql_type(column: Column, *, postgresql: bool) -> str:
    """SQLite stores a decimal as an integer scaled by 10**scale and a timestamp as
    canonical text. PostgreSQL stores both in its own types, which its COPY parses
    straight from the file's text, so a file's rows need no conversion step: NUMERIC
    with the column's scale (exact: no stored value has more fractional digits, and
    each is kept, and rendered, with exactly `scale` of them) and TIMESTAMP(TZ)."""
    if column.type is ColumnType.INTEGER:
        return "BIGINT" if postgresql else "INTEGER"
    if column.type is ColumnType.DECIMAL:
        return f"NUMERIC({PG_NUMERIC_PRECISION}, {column.scale})" if postgresql else "INTEGER"
    if column.type is ColumnType.BOOLEAN:
        return "BOOLEAN" if postgresql else "INTEGER"
    if column.type is ColumnType.TIMESTAMP and postgresql:
        return "TIMESTAMPTZ" if column.timezone else "TIMESTAMP"
    # Byte order, the same on both backends: "C" collation on PostgreSQL.
    return 'TEXT COLLATE "C"' if postgresql else "TEXT"


def create_table(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    *,
    primary_key: bool = True,
    generated_ids: bool = True,
    file_ids: bool = False,
) -> None:
    """Without `primary_key` (PostgreSQL, for a bulk load), the row id's index is
    added afterwards by `add_primary_key` (a new source's, once its load committed:
    `add_missing_primary_key`): building it once is cheaper than keeping it row by row.
    Without `generated_ids` (a derived output, written whole with its row ids)
    PostgreSQL's row id is a plain column: no identity sequence to rename when the table
    replaces another. `file_ids`: a source's table, with `_file_id`, whose
    row ids are never given twice (`source_row_id`)."""
    postgresql = backend_of(conn).is_postgresql
    if not postgresql:
        row_id = source_row_id() if file_ids else f"{ROW_ID} INTEGER PRIMARY KEY"
    else:
        row_id = f"{ROW_ID} BIGINT" + (" GENERATED ALWAYS AS IDENTITY" if generated_ids else "")
        row_id += " PRIMARY KEY" if primary_key else ""
    typed = [f"{c.physical} {sql_type(c, postgresql=postgresql)}" for c in columns]
    if file_ids:
        typed.append(file_id_definition(postgresql=postgresql))
    body = ", ".join([row_id, *typed, f"{ROW_JSON} TEXT"])
    conn.exec_driver_sql(f"CREATE TABLE {table} ({body})")


def source_row_id() -> str:
    """SQLite: a source's row id, AUTOINCREMENT. A plain INTEGER PRIMARY KEY gives the
    next row max+1, so after a file's rows are taken back (or a snapshot replaced) a
    new row could get the id of a removed one: `_row` would name two rows over time,
    and an incremental run reading the rows after the last id it read would miss it.
    PostgreSQL's identity never gives an id twice."""
    return f"{ROW_ID} INTEGER PRIMARY KEY AUTOINCREMENT"


def file_id_definition(*, postgresql: bool) -> str:
    """The `_file_id` column's definition (also the migration's that added it)."""
    if postgresql:
        return f"{FILE_ID} BIGINT DEFAULT {_PG_FILE_ID_DEFAULT}"
    return f"{FILE_ID} INTEGER"


def with_file_id(names: str, values: str, file_id: int | None) -> tuple[str, str]:
    """An INSERT's column names and values (SQL text), with `_file_id` and the file's id,
    a constant, when the rows come from a file."""
    if file_id is None:
        return names, values
    return f"{names}, {FILE_ID}", f"{values}, {int(file_id)}"


def set_file_id(conn: Connection, file_id: int) -> None:
    """PostgreSQL: rows this transaction inserts into a source's table without naming
    `_file_id` get `file_id` (the column's DEFAULT reads it). Set before any savepoint a
    load may roll back to, which would undo it."""
    conn.exec_driver_sql(f"SET LOCAL {FILE_ID_SETTING} = '{int(file_id)}'")


def add_primary_key(conn: Connection, table: str) -> None:
    conn.exec_driver_sql(f"ALTER TABLE {table} ADD PRIMARY KEY ({ROW_ID})")


# Row ids a COPY filling a new PostgreSQL table takes from its session's cache: given one
# at a time, each id locked the sequence's page (0.18 s of the server's CPU a million
# rows), and `_file_id`'s default read a setting for every row (0.07 s).
PG_FILL_ID_CACHE = 10_000


def prepare_fill(conn: Connection, table: str, file_id: int | None) -> None:
    """PostgreSQL, a table created in this transaction for a COPY (no other session sees
    it): row ids cached by the session, `_file_id` a constant, until `finish_fill`."""
    default = "NULL" if file_id is None else str(int(file_id))
    conn.exec_driver_sql(
        f"ALTER TABLE {table} ALTER COLUMN {ROW_ID} SET CACHE {PG_FILL_ID_CACHE}, "
        f"ALTER COLUMN {FILE_ID} SET DEFAULT {default}"
    )


def finish_fill(conn: Connection, table: str, rows: int) -> None:
    """After `prepare_fill` and a COPY of `rows` rows: the columns' usual defaults, and
    the next id right after the last row's (the ids the session cached and did not use
    are never given). The row id's primary key is not built here: the load commits
    without it, and the workers add it (`add_missing_primary_key`) before anything else
    they do to the rows (issue #36)."""
    conn.exec_driver_sql(
        f"ALTER TABLE {table} ALTER COLUMN {ROW_ID} SET CACHE 1, "
        f"ALTER COLUMN {FILE_ID} SET DEFAULT {_PG_FILE_ID_DEFAULT}"
    )
    if rows:
        conn.exec_driver_sql(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{ROW_ID}'), {int(rows)})"
        )


def add_missing_primary_key(conn: Connection, table: str) -> bool:
    """PostgreSQL: the row id's primary key, if the table has none (a new source's table
    is committed without it: `finish_fill`); whether it was built. The unique index is
    built first under a SHARE lock, which readers do not conflict with; only naming it the
    key takes the exclusive lock, a catalogue change (an identity is NOT NULL already, so
    nothing is scanned). The caller holds the resource's lock, so two builders never
    race. SQLite: nothing to do (the row id is the table's own key)."""
    if not backend_of(conn).is_postgresql:
        return False
    keyed = conn.exec_driver_sql(
        "SELECT 1 FROM pg_index WHERE indrelid = to_regclass(%(t)s) AND indisprimary",
        {"t": table},
    ).first()
    if keyed is not None:
        return False
    conn.exec_driver_sql(f"CREATE UNIQUE INDEX {table}_pkey ON {table} ({ROW_ID})")
    conn.exec_driver_sql(
        f"ALTER TABLE {table} ADD CONSTRAINT {table}_pkey PRIMARY KEY USING INDEX {table}_pkey"
    )
    return True


def drop_table(conn: Connection, table: str) -> None:
    conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}")


def widen_column(conn: Connection, table: str, old: Column, new: Column) -> None:
    """A file brought more fractional digits to a numeric column (an integer column
    becomes decimal): SQLite multiplies its scaled integers, PostgreSQL changes the
    column's type (both rewrite the table). Every row's stored JSON text had the old
    number of digits: cleared in the same statement."""
    if backend_of(conn).is_postgresql:
        conn.exec_driver_sql(
            f"ALTER TABLE {table} "
            f"ALTER COLUMN {old.physical} TYPE {sql_type(new, postgresql=True)}, "
            f"ALTER COLUMN {ROW_JSON} TYPE TEXT USING NULL"
        )
        return
    factor = 10 ** (new.scale - old.scale)
    conn.exec_driver_sql(
        f"UPDATE {table} SET {old.physical} = {old.physical} * {factor}, {ROW_JSON} = NULL"
    )


def stored_range(conn: Connection, table: str, column: Column) -> tuple[int | None, int | None]:
    """(smallest, largest) value of a numeric column, as integers at its scale."""
    source = row_table(table, [column])
    col = source.c[column.physical]
    row = conn.execute(sa.select(sa.func.min(col), sa.func.max(col)).select_from(source)).one()
    return row[0], row[1]


@dataclass(frozen=True)
class PartialIndex:
    """An index of `column` over only the rows whose `equals` column holds `value` and
    whose `present` column has a value, shaped like the per-column ones. A
    reconciliation's open rows of one side are a few percent of its output: their page,
    ordered or filtered on one of the side's columns, then walks these rows only, not
    every row of the column's whole index (an Exceptions view's deep page at 1M rows:
    0.5-3 s). The planners use it for a query whose conditions include `equals =
    value` and any comparison of `present` (both imply its WHERE)."""

    column: Column
    equals: Column
    value: str
    present: Column

    def statement(self, table: str, prefix: str, *, postgresql: bool) -> str:
        """CREATE INDEX IF NOT EXISTS `{prefix}_{column}_when_{present}`."""
        ordered = f"{self.column.physical} NULLS FIRST, {ROW_ID}" if postgresql else None
        literal = "'" + self.value.replace("'", "''") + "'"
        return (
            f"CREATE INDEX IF NOT EXISTS {prefix}_{self.column.physical}_when_"
            f"{self.present.physical} ON {table} ({ordered or self.column.physical}) "
            f"WHERE {self.equals.physical} = {literal} AND {self.present.physical} IS NOT NULL"
        )


def build_indexes(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    *,
    names: str | None = None,
    analyze: bool = True,
    partial: Sequence[PartialIndex] = (),
) -> None:
    """One index per column, shaped like the ORDER BY the Data API emits (NULL first,
    ties on the row id), and the `partial` ones, then fresh planner statistics.
    Idempotent: an index a crash left behind is kept. Index `ix_{names}_{physical}`,
    `names` being the table's name unless told: a table renamed later keeps its
    indexes' names (SQLite cannot rename an index), so a table built to replace another
    names them apart. Without `analyze` the caller refreshes the statistics once it has
    built them all."""
    prefix = f"ix_{names or table}"
    if backend_of(conn).is_postgresql:
        _build_postgresql_indexes(conn.engine, table, columns, prefix, partial)
    else:
        _build_sqlite_indexes(conn, table, columns, prefix, partial)
    if analyze:
        conn.exec_driver_sql(f"ANALYZE {table}")


def build_indexes_in_steps(
    engine: Engine,
    table: str,
    columns: Sequence[Column],
    *,
    names: str | None = None,
    guard: Callable[[Connection], None] | None = None,
    partial: Sequence[PartialIndex] = (),
) -> None:
    """`build_indexes` for a committed table readers already use. On SQLite each index is
    a transaction of its own: the write lock is held for one index at a time, never for
    all (decision 0013), and the statistics come at the end. `guard` runs first in each
    transaction (a derived run checks there that it still holds its lease)."""
    if backend_of(engine).is_postgresql:
        with not_pooled(engine.connect()) as conn, conn.begin():  # ANALYZE reads the table
            if guard is not None:
                guard(conn)
            build_indexes(conn, table, columns, names=names, partial=partial)
        return
    steps: list[tuple[Sequence[Column], Sequence[PartialIndex]]] = [
        *(([column], ()) for column in columns),
        *(((), (index,)) for index in partial),
    ]
    for own, own_partial in steps:
        with job_step(engine) as conn:
            if guard is not None:
                guard(conn)
            build_indexes(conn, table, own, names=names, analyze=False, partial=own_partial)
    with job_step(engine) as conn:
        if guard is not None:
            guard(conn)
        conn.exec_driver_sql(f"ANALYZE {table}")


def _create_index(conn: Connection, table: str, column: Column, prefix: str) -> None:
    conn.exec_driver_sql(
        f"CREATE INDEX IF NOT EXISTS {prefix}_{column.physical} ON {table} ({column.physical})"
    )


def _build_sqlite_indexes(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    prefix: str,
    partial: Sequence[PartialIndex],
) -> None:
    # SQLite's sorter takes as much memory as the page cache allows; one big in-memory
    # sort per index is slower than sorting runs of ~2 MB and merging them (measured on
    # 1M rows, ten indexes: 4.7 s with the 64 MiB cache, 3.4 s).
    cache = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
    conn.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_INDEX_SORT_KIB}")
    try:
        for column in columns:
            _create_index(conn, table, column, prefix)
        for index in partial:
            conn.exec_driver_sql(index.statement(table, prefix, postgresql=False))
    finally:
        conn.exec_driver_sql(f"PRAGMA cache_size = {int(cache)}")


def _build_postgresql_indexes(
    engine: Engine,
    table: str,
    columns: Sequence[Column],
    prefix: str,
    partial: Sequence[PartialIndex],
) -> None:
    """The indexes are shared among a few sessions, each building its share in its own
    transaction (CREATE INDEX takes a SHARE lock: builds of one table run side by side).
    Measured on 1M rows, ten indexes, two cores: one session with parallel workers and
    256 MB of sort memory 5.3 s; two sessions of 16 MB each, no workers, 4.1 s."""
    statements = [
        f"CREATE INDEX IF NOT EXISTS {prefix}_{column.physical} ON {table} "
        f"({column.physical} NULLS FIRST, {ROW_ID})"
        for column in columns
    ] + [index.statement(table, prefix, postgresql=True) for index in partial]
    shares = [statements[i::PG_INDEX_SESSIONS] for i in range(PG_INDEX_SESSIONS)]

    def build(share: Sequence[str]) -> None:
        with not_pooled(engine.connect()) as conn, conn.begin():
            conn.exec_driver_sql(f"SET LOCAL maintenance_work_mem = '{PG_INDEX_SORT_MEMORY}'")
            conn.exec_driver_sql("SET LOCAL max_parallel_maintenance_workers = 0")
            for statement in share:
                conn.exec_driver_sql(statement)

    with ThreadPoolExecutor(PG_INDEX_SESSIONS, thread_name_prefix="tally-index") as pool:
        for built in [pool.submit(build, share) for share in shares if share]:
            built.result()


def vacuum(engine: Engine, table: str) -> None:
    """PostgreSQL: set the visibility map after a bulk load, so index-only scans (deep
    OFFSETs over an ordering index) skip the heap. Runs outside any transaction."""
    if engine.dialect.name != "postgresql":
        return
    with not_pooled(autocommit_connection(engine)) as conn:
        conn.exec_driver_sql(f"VACUUM (ANALYZE) {table}")


def row_table(table: str, columns: Sequence[Column]) -> sa.TableClause:
    """The table with its columns typed as their values are bound and read, and the
    system columns (`_row_id`; `_json`, the row's stored text; `_file_id`, which only a
    source's table has: a statement names one only for a query that asked for it)."""
    return sa.table(
        table,
        sa.column(ROW_ID, sa.BigInteger()),
        sa.column(ROW_JSON, sa.Text()),
        sa.column(FILE_ID, sa.BigInteger()),
        *(sa.column(c.physical, bind_type(c)) for c in columns),
    )


def drop_in_steps(
    engine: Engine,
    table: str,
    guard: Callable[[Connection], None] | None = None,
    *,
    batch_rows: int = 50_000,
) -> None:
    """Drop a table nobody reads any more (none: nothing to do). SQLite frees a dropped
    table's pages one by one while it holds the one write lock (a million rows with their
    indexes: ~25 s): there its indexes are dropped one per transaction, then its rows
    deleted `batch_rows` at a time, then the empty table. PostgreSQL drops it at once.
    `guard` runs first in each transaction."""
    if backend_of(engine).is_postgresql:
        with write_connection(engine) as conn, conn.begin():
            if guard is not None:
                guard(conn)
            drop_table(conn, table)
        return
    with engine.connect() as conn:
        indexes = (
            conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
                "AND sql IS NOT NULL",
                (table,),
            )
            .scalars()
            .all()
        )
        exists = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).first()
    if exists is None:
        return
    batch = (
        f"DELETE FROM {table} WHERE rowid IN "
        f"(SELECT rowid FROM {table} ORDER BY rowid LIMIT {batch_rows})"
    )
    steps = [f"DROP INDEX IF EXISTS {index}" for index in indexes]
    for sql in steps:
        with job_step(engine) as conn:
            if guard is not None:
                guard(conn)
            conn.exec_driver_sql(sql)
    deleted = True
    while deleted:
        with job_step(engine) as conn:
            if guard is not None:
                guard(conn)
            deleted = conn.exec_driver_sql(batch).rowcount > 0
    with write_connection(engine) as conn, conn.begin():
        if guard is not None:
            guard(conn)
        drop_table(conn, table)
