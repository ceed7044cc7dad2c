"""SQLite's bulk load: the checked rows appended by one `executemany` per batch, converted
in SQL (a new table's many rows to a statement, their row ids given: `SqliteAppender`);
for a large file, the raw rows staged while another process checks them, then converted
by one INSERT ... SELECT (or, from a staging file, as they are copied out of it:
`take_staged`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from itertools import chain

from sqlalchemy import Connection

from tally.core.columns import Column, ColumnType, canonical_timestamp
from tally.storage.bulk_load.interface import (
    BulkLoad,
    Expected,
    FileReading,
    RowBatches,
    ValueShape,
)
from tally.storage.engine import unsynced_commits, yield_to_writers
from tally.storage.resource_tables.ddl import ROW_ID, create_table, drop_table, with_file_id

# Rows in one multi-row INSERT (`SqliteAppender` with row ids given): the gain levels off
# past a few dozen (measured: docs/benchmarks.md, 2026-11-30).
ROWS_PER_STATEMENT = 50
# Rows of a table to be published written per transaction (`SqliteTableFill`): a writer
# waiting for the lock waits for one at most, a quarter of a whole 10,000-row batch
# (~35 ms on a quiet machine at the benchmark's 10 columns: notifications accepted while
# a 1M-row file loaded waited p99 54 ms); 1,000 cost 3 % more CPU (docs/benchmarks.md,
# 2026-11-30).
FILL_TRANSACTION_ROWS = 2_500


def _sqlite_expression(column: Column, v: str, shape: ValueShape) -> str:
    """SQL turning `v` (a parameter or a staged column holding the file's text) into
    the stored value."""
    kind = column.type
    maybe_null = f"nullif({v}, '')" if shape.has_empty else v
    if kind is ColumnType.INTEGER or (kind is ColumnType.DECIMAL and not column.scale):
        # INTEGER affinity turns '42' into 42 on its own
        return f"CAST({maybe_null} AS INTEGER)" if shape.has_empty else v
    if kind is ColumnType.DECIMAL and shape.uniform_scale:
        return f"CAST(replace({maybe_null}, '.', '') AS INTEGER)"
    if kind is ColumnType.DECIMAL:
        zeros, s = "0" * column.scale, column.scale
        # '12.5' at scale 2 -> '12.50' -> 1250; '12' -> '1200' -> 1200
        return (
            f"CASE WHEN {v} = '' THEN NULL WHEN instr({v}, '.') THEN "
            f"CAST(replace(substr({v} || '{zeros}', 1, instr({v}, '.') + {s}), '.', '')"
            f" AS INTEGER) ELSE CAST({v} || '{zeros}' AS INTEGER) END"
        )
    if kind is ColumnType.BOOLEAN:
        return f"CASE lower({v}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END"
    if kind is ColumnType.TIMESTAMP and shape.plain_timestamps:
        # already canonical but for a ' ' separator or a 'Z'
        return f"replace(substr({maybe_null}, 1, 19), ' ', 'T')"
    return maybe_null


def covers(taken: ValueShape, found: ValueShape, column: Column) -> bool:
    """Whether the conversion chosen for the shape `taken` is exact for every value of
    `column` whose shape is `found`: no empty value, one scale, plain timestamps only
    where `taken` counted on it."""
    return (
        (taken.has_empty or not found.has_empty)
        and (
            found.uniform_scale or not taken.uniform_scale or column.type is not ColumnType.DECIMAL
        )
        and (
            found.plain_timestamps
            or not taken.plain_timestamps
            or column.type is not ColumnType.TIMESTAMP
        )
    )


class SqliteAppender:
    """Appends batches of raw file rows (lists of str, in the file's column order).

    Row by row (one `executemany` step per row) unless `first_id` is given: then the
    rows go `ROWS_PER_STATEMENT` at a time in one multi-row INSERT, each with its row
    id given (`first_id` for the first row appended, the next ones in order), so the
    file's order does not rest on the order SQLite inserts a VALUES list's rows in,
    which it does not document. A statement per row costs SQLite the statement's set-up
    and AUTOINCREMENT's bookkeeping each time: ~10 % of the insert's CPU.
    """

    def __init__(
        self,
        conn: Connection,
        table: str,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        file_id: int | None = None,
        first_id: int | None = None,
    ) -> None:
        shaped = [(c, shapes.get(c.physical, ValueShape())) for c in ordered]
        self._canonicalise = [
            i
            for i, (c, shape) in enumerate(shaped)
            if c.type is ColumnType.TIMESTAMP and not shape.plain_timestamps
        ]
        driver = conn.connection.dbapi_connection
        assert driver is not None
        self._cursor = driver.cursor()
        self._next_id = first_id
        self._width = len(ordered)
        names = ", ".join(c.physical for c in ordered)

        def values(first: int) -> str:  # one row's, its values from parameter `first` on
            return ", ".join(
                _sqlite_expression(c, f"?{first + i}", shape) for i, (c, shape) in enumerate(shaped)
            )

        if first_id is None:
            into, row = with_file_id(names, values(1), file_id)
            self._sql = f"INSERT INTO {table} ({into}) VALUES ({row})"
            return
        # ?1: the statement's first row's id; then each row's values
        into, _ = with_file_id(f"{ROW_ID}, {names}", "", file_id)
        self._insert = f"INSERT INTO {table} ({into}) VALUES "
        self._values = [
            "({})".format(with_file_id("", f"?1 + {j}, {values(2 + j * self._width)}", file_id)[1])
            for j in range(_rows_per_statement(driver, self._width))
        ]
        self._sql = self._insert + ", ".join(self._values)

    def append(self, rows: list[list[str]]) -> None:
        for i in self._canonicalise:  # offsets and fractions: exact conversion in Python
            for row in rows:
                if row[i]:
                    row[i] = canonical_timestamp(row[i])[0]
        if self._next_id is None:
            self._cursor.executemany(self._sql, rows)
            return
        step, first = len(self._values), self._next_id
        whole = len(rows) - len(rows) % step
        self._cursor.executemany(
            self._sql,
            [
                [first + start, *chain.from_iterable(rows[start : start + step])]
                for start in range(0, whole, step)
            ],
        )
        if whole < len(rows):  # the last few: a statement of their own
            rest = rows[whole:]
            self._cursor.execute(
                self._insert + ", ".join(self._values[: len(rest)]),
                [first + whole, *chain.from_iterable(rest)],
            )
        self._next_id = first + len(rows)

    def close(self) -> None:
        self._cursor.close()


def _rows_per_statement(driver: object, width: int) -> int:
    """Rows of `width` values (and an id) in one INSERT: ROWS_PER_STATEMENT, fewer
    where the statement would pass SQLite's limit on a parameter's number."""
    assert isinstance(driver, sqlite3.Connection)
    most = driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(ROWS_PER_STATEMENT, (most - 1) // width))


class SqliteBulkLoad(BulkLoad):
    """SQLite: while another process checks the file, this one copies the raw rows into
    a table of their own (SQLite has no COPY; a plain `executemany` of text is its
    fastest insert); once the types are known, one INSERT ... SELECT converts them.
    `raw_table`: that table, in the connection's main database (a staging file's, read
    afterwards by another connection: `take_staged`); by default a temporary table."""

    stages_rows = True

    def __init__(
        self,
        conn: Connection,
        table: str,
        *,
        file_id: int | None = None,
        raw_table: str | None = None,
    ) -> None:
        super().__init__(conn, table)
        self._staging = raw_table or f"temp.staging_{table}"
        self._staged_rows: int | None = None
        self._file_id = file_id

    def stage_rows(self, batches: RowBatches, width: int, expected: Expected | None = None) -> None:
        names = ", ".join(f"s{i}" for i in range(width))
        self._conn.exec_driver_sql(f"DROP TABLE IF EXISTS {self._staging}")
        # the row id in the file's order, 1 up (`take_staged`'s readers copy it in ranges)
        self._conn.exec_driver_sql(
            f"CREATE TABLE {self._staging} ({ROW_ID} INTEGER PRIMARY KEY, {names})"
        )
        insert = f"INSERT INTO {self._staging} ({names}) VALUES ({', '.join('?' * width)})"
        driver = self._conn.connection.dbapi_connection
        assert driver is not None
        cursor = driver.cursor()
        rows = 0
        try:
            with batches() as stream:
                for batch in stream:
                    cursor.executemany(insert, batch)
                    rows += len(batch)
        finally:
            cursor.close()
        self._staged_rows = rows

    def settle(self, reading: FileReading, columns: Sequence[Column]) -> bool:
        if self._staged_rows is not None and self._staged_rows != reading.rows:
            self._drop_staging()  # cannot happen with one parser; checked all the same
        return False

    def take_staged(
        self, ordered: Sequence[Column], shapes: Mapping[str, ValueShape]
    ) -> tuple[str, ...] | None:
        """The staged raw rows handed over, unconverted, to be read from `raw_table`
        afterwards: the SQL turning them into each column's stored value (of `ordered`,
        the file's order), over the staged columns. None, and nothing handed over, when
        nothing was staged or a column needs Python to convert."""
        conversion = self._conversion(ordered, shapes)
        if conversion is not None:
            self._staged_rows = None  # the caller's now: `abort` leaves it
        return conversion

    def _conversion(
        self, ordered: Sequence[Column], shapes: Mapping[str, ValueShape]
    ) -> tuple[str, ...] | None:
        shaped = [(c, shapes.get(c.physical, ValueShape())) for c in ordered]
        needs_python = any(
            c.type is ColumnType.TIMESTAMP and not shape.plain_timestamps for c, shape in shaped
        )
        if self._staged_rows is None or needs_python:
            return None
        return tuple(_sqlite_expression(c, f"s{i}", shape) for i, (c, shape) in enumerate(shaped))

    def append(
        self,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        batches: RowBatches,
    ) -> None:
        conversion = self._conversion(ordered, shapes)
        if conversion is None:
            self._drop_staging()
            self._append_batches(ordered, shapes, batches)
            return
        names, values = with_file_id(
            ", ".join(c.physical for c in ordered), ", ".join(conversion), self._file_id
        )
        self._conn.exec_driver_sql(
            f"INSERT INTO {self._table} ({names}) SELECT {values} "
            f"FROM {self._staging} ORDER BY {ROW_ID}"
        )
        self._drop_staging()

    def _append_batches(
        self,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        batches: RowBatches,
    ) -> None:
        appender = SqliteAppender(self._conn, self._table, ordered, shapes, self._file_id)
        try:
            with batches() as rows:
                for batch in rows:
                    appender.append(batch)
        finally:
            appender.close()

    def _drop_staging(self) -> None:
        if self._staged_rows is not None:
            self._conn.exec_driver_sql(f"DROP TABLE IF EXISTS {self._staging}")
            self._staged_rows = None

    def abort(self) -> None:
        """Called when the load ends, whichever way."""
        self._drop_staging()


class SqliteTableFill(BulkLoad):
    """SQLite, a placeholder's file: its rows written straight into `table`, the table to
    be published (nothing reads it until then), converted for the `Expected` columns and
    `shapes` (the checks' own, or while a large file is checked, what its head suggests).
    In short transactions of the main database, each after the writers waiting
    (decision 0017), unsynced (`unsynced_commits`); `conn` is a write connection outside
    any transaction. `keep` tells whether the checks settled those columns; `abort`
    drops the table otherwise."""

    stages_rows = True

    def __init__(
        self,
        conn: Connection,
        table: str,
        shapes: Mapping[str, ValueShape],
        *,
        file_id: int | None = None,
    ) -> None:
        super().__init__(conn, table)
        self._shapes = shapes
        self._file_id = file_id
        self._columns: tuple[Column, ...] | None = None
        self._rows = 0
        self._kept = False

    def stage_rows(self, batches: RowBatches, width: int, expected: Expected | None = None) -> None:
        assert expected is not None
        assert expected.create
        conn, table = self._conn, self._table
        with conn.begin():
            drop_table(conn, table)
            create_table(conn, table, expected.columns, file_ids=True)
        self._columns = expected.columns
        # a new table: its row ids from 1, given in the INSERTs
        appender = SqliteAppender(
            conn, table, expected.columns, self._shapes, self._file_id, first_id=1
        )
        try:
            with unsynced_commits(conn), batches() as stream:
                for batch in stream:
                    for start in range(0, len(batch), FILL_TRANSACTION_ROWS):
                        yield_to_writers(conn)
                        with conn.begin():
                            appender.append(batch[start : start + FILL_TRANSACTION_ROWS])
                    self._rows += len(batch)
        finally:
            appender.close()

    def keep(self, columns: Sequence[Column], shapes: Mapping[str, ValueShape], rows: int) -> bool:
        """Whether the rows written serve: the checks settled the same `columns` (the
        file's order), as many rows, and every value has the shape its conversion took
        (`covers`)."""
        self._kept = (
            self._columns == tuple(columns)
            and self._rows == rows
            and all(covers(self._shapes[c.physical], shapes[c.physical], c) for c in columns)
        )
        return self._kept

    def abort(self) -> None:
        """Called when the load ends, whichever way: the table goes unless kept."""
        if self._columns is not None and not self._kept:
            with self._conn.begin():
                drop_table(self._conn, self._table)
