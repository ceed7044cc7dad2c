"""Bulk appends of file rows, with the type conversions done by the database.

The loader has already checked every value (pass 1); here the rows travel as the text
the file holds and the database turns them into stored values. On SQLite they go
through one `executemany` per batch, untouched by Python; on PostgreSQL the file's
bytes are COPYed straight into the table (its stored types parse the file's text) or,
when the columns cannot be told in advance, into a staging table converted by one
INSERT ... SELECT. Both are several times faster than converting values in Python.
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, cast

import psycopg
from sqlalchemy import Connection

from tally.core.columns import Column, ColumnType, canonical_timestamp
from tally.storage.engine import backend_of
from tally.storage.resource_tables import add_primary_key, create_table, drop_table, sql_type

SQLITE_LOAD_CACHE_KIB = 16384  # page cache of a connection while it loads a file


@dataclass(frozen=True)
class ValueShape:
    """What the loader's first pass saw of one column's values, so the cheapest exact
    conversion can be chosen: each avoided SQL function saves ~0.1 s per million rows."""

    has_empty: bool = True
    uniform_scale: bool = False  # every decimal has exactly `scale` fractional digits
    plain_timestamps: bool = False  # every timestamp is 'YYYY-MM-DD[T ]HH:MM:SS[Z]'


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


class SqliteAppender:
    """Appends batches of raw file rows (lists of str, in the file's column order)."""

    def __init__(
        self,
        conn: Connection,
        table: str,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
    ) -> None:
        shaped = [(c, shapes.get(c.physical, ValueShape())) for c in ordered]
        self._canonicalise = [
            i
            for i, (c, shape) in enumerate(shaped)
            if c.type is ColumnType.TIMESTAMP and not shape.plain_timestamps
        ]
        names = ", ".join(c.physical for c in ordered)
        values = ", ".join(
            _sqlite_expression(c, f"?{i + 1}", shape) for i, (c, shape) in enumerate(shaped)
        )
        self._sql = f"INSERT INTO {table} ({names}) VALUES ({values})"
        driver = conn.connection.dbapi_connection
        assert driver is not None
        self._cursor = driver.cursor()

    def append(self, rows: list[list[str]]) -> None:
        for i in self._canonicalise:  # offsets and fractions: exact conversion in Python
            for row in rows:
                if row[i]:
                    row[i] = canonical_timestamp(row[i])[0]
        self._cursor.executemany(self._sql, rows)

    def close(self) -> None:
        self._cursor.close()


# --- PostgreSQL -------------------------------------------------------------------


def _psycopg(conn: Connection) -> psycopg.Connection[Any]:
    """The driver connection under SQLAlchemy's, for COPY (PostgreSQL only)."""
    return cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)


def _pg_expression(column: Column, ref: str, shape: ValueShape) -> str:
    """SQL turning a staged text into the stored value: PostgreSQL's own input functions,
    since every stored type is one of its own (TIMESTAMPTZ read in UTC: see engine)."""
    v = f"NULLIF({ref}, '')" if shape.has_empty else ref
    return {
        ColumnType.INTEGER: f"{v}::bigint",
        ColumnType.DECIMAL: f"{v}::numeric",
        ColumnType.BOOLEAN: f"{v}::boolean",
        ColumnType.TIMESTAMP: f"{v}::timestamptz" if column.timezone else f"{v}::timestamp",
    }.get(column.type, v)


def create_staging(conn: Connection, staging: str, width: int) -> None:
    columns = ", ".join(f"s{i} text" for i in range(width))
    conn.exec_driver_sql(f"CREATE TEMP TABLE {staging} ({columns}) ON COMMIT DROP")


def copy_into(
    conn: Connection, table: str, columns: Sequence[Column], raw: RawFile, *, force_null: bool
) -> int:
    """Stream the file's bytes (header line included) into `columns` of the table; the
    number of rows COPY read. `force_null`: a quoted empty value is missing too, as an
    unquoted one is (the loader's reader cannot tell them apart)."""
    names = ", ".join(c.physical for c in columns)
    pg_encoding = "UTF8" if raw.encoding.startswith("utf") else "LATIN1"
    delimiter_sql = "E'\\t'" if raw.delimiter == "\t" else f"'{raw.delimiter}'"
    nulls = f", FORCE_NULL ({names})" if force_null else ""
    sql = (
        f"COPY {table} ({names}) FROM STDIN (FORMAT csv, HEADER true, "
        f"DELIMITER {delimiter_sql}, ENCODING '{pg_encoding}'{nulls})"
    )
    driver = _psycopg(conn)
    with driver.cursor() as cursor:
        with cursor.copy(sql) as copy:
            for chunk in raw.chunks():
                copy.write(chunk)
        return cursor.rowcount


def read_staging(conn: Connection, staging: str, width: int) -> tuple[int, list[int]]:
    """(rows, quote characters per column) of what COPY read."""
    quotes = "".join(
        f", coalesce(sum(length(s{i}) - length(replace(s{i}, '\"', ''))), 0)" for i in range(width)
    )
    row = conn.exec_driver_sql(f"SELECT count(*){quotes} FROM {staging}").one()
    return int(row[0]), [int(n) for n in row[1:]]


def insert_from_staging(
    conn: Connection,
    table: str,
    staging: str,
    ordered: Sequence[Column],
    shapes: Mapping[str, ValueShape],
) -> None:
    """Convert and append the staged rows, in file order.

    A fresh temporary table is read back in the order it was written when the scan
    starts at its first page, which `synchronize_seqscans = off` ensures; that saves
    sorting a million rows by a sequence number.
    """
    names = ", ".join(c.physical for c in ordered)
    values = ", ".join(
        _pg_expression(c, f"s{i}", shapes.get(c.physical, ValueShape()))
        for i, c in enumerate(ordered)
    )
    conn.exec_driver_sql("SET LOCAL timezone = 'UTC'")
    conn.exec_driver_sql("SET LOCAL synchronize_seqscans = off")
    conn.exec_driver_sql(f"INSERT INTO {table} ({names}) SELECT {values} FROM {staging}")


# --- one interface for the loader ---------------------------------------------------


@dataclass(frozen=True)
class FileReading:
    """What the loader's checks read from the file, to compare with what COPY read.

    PostgreSQL's CSV parser differs from Python's on blank lines (a NULL row, or an
    error), on a lone backslash-dot line (the end of the data) and on a quote inside an
    unquoted field (it opens a quoted section; Python keeps it as text). Each changes
    the row count or the number of quote characters in the values.
    """

    rows: int
    blank_lines: int = 0
    quotes: Sequence[int] | None = None  # quote characters per column; None: none at all


@dataclass(frozen=True)
class RawFile:
    """The file's bytes as they are (header line included), and how to read them."""

    chunks: Callable[[], Iterator[bytes]]
    width: int
    delimiter: str
    encoding: str


@dataclass(frozen=True)
class Expected:
    """The table the file's rows are expected to go to as they are: its columns in the
    file's order, and whether it is to be created for them (a placeholder's first file).
    The loader's checks decide afterwards whether the expectation held."""

    columns: tuple[Column, ...]
    create: bool


RowBatches = Callable[[], AbstractContextManager[Iterator[list[list[str]]]]]


class BulkLoad:
    """One file's rows on their way into a table, inside the caller's transaction.

    `stage` may start moving the raw bytes before the types are known (PostgreSQL
    COPYs them in a thread while the loader's first pass runs); `append` converts and
    appends, reading the batches again when the backend needs Python to send them.
    """

    # Whether `stage_rows` can copy the rows while another process runs the checks.
    stages_rows = False
    # Whether `stage` can put the rows straight into the table the loader expects.
    takes_expected = False

    def __init__(self, conn: Connection, table: str) -> None:
        self._conn = conn
        self._table = table

    def stage_rows(self, batches: RowBatches, width: int) -> None:
        raise NotImplementedError

    def stage(self, raw: RawFile, expected: Expected | None) -> None:
        return None

    def settle(self, reading: FileReading, columns: Sequence[Column]) -> bool:
        """Called once the checks have read the file and settled its `columns` (in the
        file's order), before any other statement of the transaction: keep or discard
        what `stage` moved. True when the rows are in the table already."""
        return False

    def append(
        self,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        batches: RowBatches,
    ) -> None:
        appender = SqliteAppender(self._conn, self._table, ordered, shapes)
        try:
            with batches() as rows:
                for batch in rows:
                    appender.append(batch)
        finally:
            appender.close()

    def abort(self) -> None:
        return None


class SqliteBulkLoad(BulkLoad):
    """SQLite: while another process checks the file, this one copies the raw rows into
    a temporary table (SQLite has no COPY; a plain `executemany` of text is its fastest
    insert); once the types are known, one INSERT ... SELECT converts them."""

    stages_rows = True

    def __init__(self, conn: Connection, table: str) -> None:
        super().__init__(conn, table)
        self._staging = f"staging_{table}"
        self._staged_rows: int | None = None
        # Appending needs few cached pages: with the connection's 64 MiB (sized for
        # reads) the load's dirty pages filled it as the file grew (1M rows: 151 MB
        # peak heap, half of them 137 MB); with 16 MiB both peak at 101 MB, as fast.
        self._cache_size = conn.exec_driver_sql("PRAGMA cache_size").scalar_one()
        conn.exec_driver_sql(f"PRAGMA cache_size = -{SQLITE_LOAD_CACHE_KIB}")

    def stage_rows(self, batches: RowBatches, width: int) -> None:
        names = ", ".join(f"s{i}" for i in range(width))
        self._conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{self._staging}")
        self._conn.exec_driver_sql(f"CREATE TEMP TABLE {self._staging} ({names})")
        insert = f"INSERT INTO temp.{self._staging} VALUES ({', '.join('?' * width)})"
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

    def append(
        self,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        batches: RowBatches,
    ) -> None:
        shaped = [(c, shapes.get(c.physical, ValueShape())) for c in ordered]
        needs_python = any(
            c.type is ColumnType.TIMESTAMP and not shape.plain_timestamps for c, shape in shaped
        )
        if self._staged_rows is None or needs_python:
            self._drop_staging()
            super().append(ordered, shapes, batches)
            return
        names = ", ".join(c.physical for c in ordered)
        values = ", ".join(
            _sqlite_expression(c, f"s{i}", shape) for i, (c, shape) in enumerate(shaped)
        )
        self._conn.exec_driver_sql(
            f"INSERT INTO {self._table} ({names}) SELECT {values} "
            f"FROM temp.{self._staging} ORDER BY rowid"
        )
        self._drop_staging()

    def _drop_staging(self) -> None:
        if self._staged_rows is not None:
            self._conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{self._staging}")
            self._staged_rows = None

    def abort(self) -> None:
        """Called when the load ends, whichever way: the pooled connection gets its own
        cache size back."""
        self._drop_staging()
        self._conn.exec_driver_sql(f"PRAGMA cache_size = {int(self._cache_size)}")


_END_OF_DATA = "\\."


class PostgresBulkLoad(BulkLoad):
    """PostgreSQL: the file's bytes go to COPY in a thread while the loader's first pass
    runs. When the loader expects the columns (the resource's own, or a placeholder's
    guessed from the file's first rows), COPY writes them straight into the table, in
    the stored types, which PostgreSQL parses from the file's text; otherwise, or when
    COPY refuses a value, into a staging table of text, converted by one INSERT ...
    SELECT once the types are known. Either is kept only if the checks agree."""

    _SAVEPOINT = "tally_staging"
    takes_expected = True

    def __init__(self, conn: Connection, table: str) -> None:
        super().__init__(conn, table)
        self._staging = f"staging_{table}"
        self._raw: RawFile | None = None
        self._expected: Expected | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._copied: str | None = None  # "table" or "staging": where COPY put the rows
        self._copied_rows = 0

    def stage(self, raw: RawFile, expected: Expected | None) -> None:
        self._raw = raw
        self._expected = expected
        self._conn.exec_driver_sql(f"SAVEPOINT {self._SAVEPOINT}")
        if expected is not None and expected.create:
            drop_table(self._conn, self._table)
            create_table(self._conn, self._table, expected.columns, primary_key=False)

        def run() -> None:
            try:
                self._copy(direct=expected is not None)
            except BaseException as error:  # reported to the loader's thread in settle
                self._error = error

        self._thread = threading.Thread(target=run, name="tally-copy", daemon=True)
        self._thread.start()

    def _copy(self, *, direct: bool) -> None:
        assert self._raw is not None
        raw = self._raw
        if direct:
            assert self._expected is not None
            try:
                self._copied_rows = copy_into(
                    self._conn, self._table, self._expected.columns, raw, force_null=True
                )
                if self._expected.create:  # while the checks still read the file
                    add_primary_key(self._conn, self._table)
                self._copied = "table"
                return
            except psycopg.DataError:  # a value the guessed type refuses: stage instead
                self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._SAVEPOINT}")
        staging = [Column(f"s{i}", f"s{i}", ColumnType.TEXT) for i in range(raw.width)]
        create_staging(self._conn, self._staging, raw.width)
        self._copied_rows = copy_into(self._conn, self._staging, staging, raw, force_null=False)
        self._copied = "staging"

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def settle(self, reading: FileReading, columns: Sequence[Column]) -> bool:
        # A failed COPY leaves the transaction aborted until the savepoint is rolled back,
        # and a rollback later would undo the loader's own statements too: decide now.
        self._join()
        if self._error is None and self._copied == "table" and not self._as_expected(columns):
            # PostgreSQL took every value, but the whole file settled other types than
            # its first rows promised: stage the raw rows after all
            self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._SAVEPOINT}")
            self._copy(direct=False)
        if self._error is not None or not self._agrees(reading):
            self._copied = None  # append sends the rows the checks saw
            self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._SAVEPOINT}")
        self._conn.exec_driver_sql(f"RELEASE SAVEPOINT {self._SAVEPOINT}")
        return self._copied == "table"

    def _as_expected(self, columns: Sequence[Column]) -> bool:
        assert self._expected is not None
        expected = [(c.physical, sql_type(c, postgresql=True)) for c in self._expected.columns]
        return expected == [(c.physical, sql_type(c, postgresql=True)) for c in columns]

    def _agrees(self, reading: FileReading) -> bool:
        """Did COPY read the rows Python's reader did? PostgreSQL's CSV parser opens a
        quoted section at any quote character; Python's (strict) only at a field's
        start, and keeps a quote elsewhere as text, or fails. So when no value the checks
        saw holds a quote, the two parsers split every field alike, and only blank lines
        and a lone backslash-dot line (the end of COPY's data) remain: the row count."""
        if reading.blank_lines or self._copied_rows != reading.rows:
            return False
        if not any(reading.quotes or ()):
            return True
        if self._copied == "table":
            return False  # staged rows can be compared quote by quote; stored ones not
        rows, quotes = read_staging(self._conn, self._staging, self._raw_width())
        return rows == reading.rows and quotes == list(reading.quotes or ())

    def _raw_width(self) -> int:
        assert self._raw is not None
        return self._raw.width

    def append(
        self,
        ordered: Sequence[Column],
        shapes: Mapping[str, ValueShape],
        batches: RowBatches,
    ) -> None:
        if self._copied == "staging":
            insert_from_staging(self._conn, self._table, self._staging, ordered, shapes)
        elif self._copied is None:
            self._send_rows(ordered, batches)

    def _send_rows(self, ordered: Sequence[Column], batches: RowBatches) -> None:
        """COPY the rows as Python's CSV reader saw them, written out again: every stored
        type parses the file's own text, so only a missing value needs saying."""
        names = ", ".join(c.physical for c in ordered)
        driver = _psycopg(self._conn)
        with (
            driver.cursor() as cursor,
            cursor.copy(f"COPY {self._table} ({names}) FROM STDIN (FORMAT csv)") as copy,
            batches() as rows,
        ):
            for batch in rows:
                buffer = io.StringIO()
                writer = csv.writer(buffer, lineterminator="\n")
                for row in batch:
                    if row == [_END_OF_DATA]:  # unquoted, it would end COPY's input
                        buffer.write(f'"{_END_OF_DATA}"\n')
                    else:
                        writer.writerow([v or None for v in row])
                copy.write(buffer.getvalue())

    def abort(self) -> None:
        self._join()


def bulk_load_for(conn: Connection, table: str) -> BulkLoad:
    if backend_of(conn).is_postgresql:
        return PostgresBulkLoad(conn, table)
    return SqliteBulkLoad(conn, table)
