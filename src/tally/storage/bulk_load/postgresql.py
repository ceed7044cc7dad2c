"""PostgreSQL's bulk load: the file's bytes COPYed in a thread while the loader's first
pass runs, straight into the table or into a staging table of text, kept only if the
checks agree; otherwise the checked rows are COPYed as Python read them."""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Mapping, Sequence
from typing import Any, cast

import psycopg
from sqlalchemy import Connection, exc

from tally.core.columns import Column, ColumnType
from tally.core.formats import SPACES, ColumnFormat, DateFormat, NumberFormat, parse_date_format
from tally.storage.bulk_load.interface import (
    BulkLoad,
    Expected,
    FileReading,
    RawFile,
    RowBatches,
    ValueShape,
)
from tally.storage.resource_tables.ddl import (
    create_table,
    drop_table,
    finish_fill,
    prepare_fill,
    sql_type,
)


def _psycopg(conn: Connection) -> psycopg.Connection[Any]:
    """The driver connection under SQLAlchemy's, for COPY (PostgreSQL only)."""
    return cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)


def _pg_expression(
    column: Column, ref: str, shape: ValueShape, fmt: ColumnFormat | None = None
) -> str:
    """SQL turning a staged text into the stored value: PostgreSQL's own input functions,
    since every stored type is one of its own (TIMESTAMPTZ read in UTC: see engine); a
    value in a declared format rewritten into the clean form first."""
    v = f"NULLIF({ref}, '')" if shape.has_empty else ref
    if fmt is not None and fmt.date is not None:
        v = _pg_date(v, parse_date_format(fmt.date))
    elif fmt is not None and column.type in (ColumnType.INTEGER, ColumnType.DECIMAL):
        v = _pg_number(v, fmt.number or NumberFormat())  # separators: `_staged_text`
    return {
        ColumnType.INTEGER: f"{v}::bigint",
        ColumnType.DECIMAL: f"{v}::numeric",
        ColumnType.BOOLEAN: f"{v}::boolean",
        ColumnType.TIMESTAMP: f"{v}::timestamptz" if column.timezone else f"{v}::timestamp",
    }.get(column.type, v)


def _pg_date(v: str, date: DateFormat) -> str:
    """ISO text from a date or timestamp at fixed places (the checks saw every value
    fit the format: only its parts are picked)."""
    at = {group: (start, end) for group, start, end in date.slices}

    def part(group: str) -> str:
        start, end = at[group]
        return f"substr({v}, {start + 1}, {end - start})"

    text = f"{part('y')} || '-' || {part('m')} || '-' || {part('d')}"
    if date.has_time:
        seconds = part("s") if date.has_seconds else "'00'"
        text += f" || ' ' || {part('H')} || ':' || {part('i')} || ':' || {seconds}"
    return f"({text})"


def _pg_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _pg_separators(v: str, number: NumberFormat) -> str:
    """A number written with declared separators, with `.` the only one left."""
    removed = number.thousands_separator
    if removed and removed in SPACES:
        removed = SPACES
    if removed:
        v = f"translate({v}, {_pg_literal(removed)}, '')"
    if number.decimal_separator != ".":
        v = f"replace({v}, {_pg_literal(number.decimal_separator)}, '.')"
    return v


def _pg_number(x: str, number: NumberFormat) -> str:
    """The clean form of a number in a declared negative form, its separators already
    rewritten (`_pg_separators`, once, in the subquery: a CASE names it five times; the
    checks saw every value fit the format)."""
    cases = []
    if "parentheses" in number.negative:
        cases.append(f"WHEN right({x}, 1) = ')' THEN '-' || substr({x}, 2, length({x}) - 2)")
    if "trailing_minus" in number.negative:
        cases.append(f"WHEN right({x}, 1) = '-' THEN '-' || left({x}, -1)")
    if "dr_cr" in number.negative:
        cases.append(f"WHEN upper(right({x}, 2)) = 'DR' THEN '-' || rtrim(left({x}, -2))")
        cases.append(f"WHEN upper(right({x}, 2)) = 'CR' THEN rtrim(left({x}, -2))")
    return f"(CASE {' '.join(cases)} ELSE {x} END)" if cases else x


def create_staging(conn: Connection, staging: str, width: int) -> None:
    columns = ", ".join(f"s{i} text" for i in range(width))
    conn.exec_driver_sql(f"CREATE TEMP TABLE {staging} ({columns}) ON COMMIT DROP")


def copy_into(
    conn: Connection, table: str, columns: Sequence[Column], raw: RawFile, *, force_null: bool
) -> int:
    """Stream the file's text (UTF-8, header line included) into `columns` of the table; the
    number of rows COPY read. `force_null`: a quoted empty value is missing too, as an
    unquoted one is (the loader's reader cannot tell them apart)."""
    names = ", ".join(c.physical for c in columns)
    delimiter_sql = "E'\\t'" if raw.delimiter == "\t" else f"'{raw.delimiter}'"
    nulls = f", FORCE_NULL ({names})" if force_null else ""
    sql = (
        f"COPY {table} ({names}) FROM STDIN (FORMAT csv, HEADER true, "
        f"DELIMITER {delimiter_sql}, ENCODING 'UTF8'{nulls})"
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
    formats: Sequence[ColumnFormat | None] = (),
) -> None:
    """Convert and append the staged rows, in file order; `formats`: how each column
    (in file order) writes its values, None the clean form.

    A fresh temporary table is read back in the order it was written when the scan
    starts at its first page, which `synchronize_seqscans = off` ensures; that saves
    sorting a million rows by a sequence number.
    """
    names = ", ".join(c.physical for c in ordered)
    formats = list(formats) or [None] * len(ordered)
    values = ", ".join(
        _pg_expression(c, f"s{i}", shapes.get(c.physical, ValueShape()), formats[i])
        for i, c in enumerate(ordered)
    )
    source = staging
    if any(formats):  # numbers' separators rewritten once, below the CASEs naming them
        texts = ", ".join(_staged_text(c, i, formats[i]) for i, c in enumerate(ordered))
        source = f"(SELECT {texts} FROM {staging} OFFSET 0) AS staged"
    conn.exec_driver_sql("SET LOCAL timezone = 'UTC'")
    conn.exec_driver_sql("SET LOCAL synchronize_seqscans = off")
    conn.exec_driver_sql(f"INSERT INTO {table} ({names}) SELECT {values} FROM {source}")


def _staged_text(column: Column, i: int, fmt: ColumnFormat | None) -> str:
    numeric = column.type in (ColumnType.INTEGER, ColumnType.DECIMAL)
    if fmt is None or fmt.date is not None or not numeric:
        return f"s{i}"
    return f"{_pg_separators(f's{i}', fmt.number or NumberFormat())} AS s{i}"


_END_OF_DATA = "\\."


def copy_rows(conn: Connection, table: str, columns: Sequence[Column], batches: RowBatches) -> int:
    """COPY the rows as the loader's reader gives them into `columns` of the table; how
    many were sent."""
    names = ", ".join(c.physical for c in columns)
    sent = 0
    with (
        _psycopg(conn).cursor() as cursor,
        cursor.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT csv)") as copy,
        batches() as rows,
    ):
        for batch in rows:
            copy.write(_csv_text(batch))
            sent += len(batch)
    return sent


# CRLF: Python's writer quotes a value holding a character of its line terminator, so
# with "\n" alone a value holding a lone "\r" went out unquoted and COPY refused the file.
_LINE_END = "\r\n"


def _csv_text(batch: list[list[str]]) -> str:
    """Rows as COPY's CSV reads them back: an empty value missing (NULL)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=_LINE_END)
    for row in batch:
        if row == [_END_OF_DATA]:  # unquoted, it would end COPY's input
            buffer.write(f'"{_END_OF_DATA}"{_LINE_END}')
        else:
            writer.writerow([v or None for v in row])
    return buffer.getvalue()


class PostgresBulkLoad(BulkLoad):
    """PostgreSQL: the file's bytes go to COPY in a thread while the loader's first pass
    runs. When the loader expects the columns (the resource's own, or a placeholder's
    guessed from the file's first rows), COPY writes them straight into the table, in
    the stored types, which PostgreSQL parses from the file's text; otherwise, or when
    COPY refuses a value, into a staging table of text, converted by one INSERT ...
    SELECT once the types are known. Either is kept only if the checks agree."""

    _SAVEPOINT = "tally_staging"
    _CONVERTING = "tally_converting"
    takes_expected = True
    stages_read_rows = True

    def __init__(self, conn: Connection, table: str, *, file_id: int | None = None) -> None:
        super().__init__(conn, table)
        self._file_id = file_id  # the rows' `_file_id`, a constant while a new table fills
        self._staging = f"staging_{table}"
        self._raw: RawFile | None = None
        self._expected: Expected | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._copied: str | None = None  # "table" or "staging": where COPY put the rows
        self._copied_rows = 0
        self._rows_staged = False  # `stage_rows` sent the rows as the loader read them

    def stage(self, raw: RawFile, expected: Expected | None) -> None:
        self._raw = raw
        self._expected = expected
        self._conn.exec_driver_sql(f"SAVEPOINT {self._SAVEPOINT}")
        if expected is not None and expected.create:
            drop_table(self._conn, self._table)
            create_table(
                self._conn, self._table, expected.columns, primary_key=False, file_ids=True
            )
            prepare_fill(self._conn, self._table, self._file_id)

        # Values in a declared format go to text first: PostgreSQL would read some
        # (`01/10/2026`, in its DateStyle) as other values than the format says.
        direct = expected is not None and not any(raw.formats)

        def run() -> None:
            try:
                self._copy(direct=direct)
            except BaseException as error:  # reported to the loader's thread in settle
                self._error = error

        self._thread = threading.Thread(target=run, name="tally-copy", daemon=True)
        self._thread.start()

    def stage_rows(self, batches: RowBatches, width: int, expected: Expected | None = None) -> None:
        """The rows as the loader reads them (a layout's lines skipped, its values
        rewritten), COPYed while another process checks them: straight into the table
        when its columns are `expected`, else into a staging table of text. A value the
        table refuses, or checks that settle other types, send the rows again after."""
        self._rows_staged = True
        self._expected = expected
        self._conn.exec_driver_sql(f"SAVEPOINT {self._SAVEPOINT}")
        if expected is not None and not expected.create:
            table, columns = self._table, expected.columns
            self._copied = "table"
        else:
            create_staging(self._conn, self._staging, width)
            table = self._staging
            columns = tuple(Column(f"s{i}", f"s{i}", ColumnType.TEXT) for i in range(width))
            self._copied = "staging"
        try:
            self._copied_rows = copy_rows(self._conn, table, columns, batches)
        except psycopg.DataError as error:  # a value the table refuses: sent again after
            self._error = error
            self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._SAVEPOINT}")

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
                    finish_fill(self._conn, self._table, self._copied_rows)
                self._copied = "table"
                return
            except psycopg.DataError:  # a value the guessed type refuses: stage instead
                self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._SAVEPOINT}")
        staging = [Column(f"s{i}", f"s{i}", ColumnType.TEXT) for i in range(raw.width)]
        create_staging(self._conn, self._staging, raw.width)
        self._copied_rows = copy_into(self._conn, self._staging, staging, raw, force_null=False)
        self._copied = "staging"
        expected = self._expected
        if expected is not None and not expected.create and any(raw.formats):
            self._convert_early(expected.columns, raw.formats)

    def _convert_early(
        self, columns: Sequence[Column], formats: Sequence[ColumnFormat | None]
    ) -> None:
        """A source's declared columns with formats: the staged rows converted into the
        table at once, in this thread, while the checks still run; kept if the checks
        settle the same columns (`settle`). A value SQL cannot convert is one the checks
        will name: the rows stay staged."""
        self._conn.exec_driver_sql(f"SAVEPOINT {self._CONVERTING}")
        try:
            insert_from_staging(self._conn, self._table, self._staging, columns, {}, formats)
        except exc.DBAPIError:
            self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._CONVERTING}")
            return
        self._copied = "converted"

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def settle(self, reading: FileReading, columns: Sequence[Column]) -> bool:
        if self._rows_staged:
            return self._settle_rows(reading, columns)
        if self._raw is None:  # nothing staged (a small file whose rows are rewritten)
            return False
        # A failed COPY leaves the transaction aborted until the savepoint is rolled back,
        # and a rollback later would undo the loader's own statements too: decide now.
        self._join()
        if self._error is None and self._copied == "converted":
            if self._as_expected(columns) and self._agrees(reading):
                self._conn.exec_driver_sql(f"RELEASE SAVEPOINT {self._SAVEPOINT}")
                return True
            self._conn.exec_driver_sql(f"ROLLBACK TO SAVEPOINT {self._CONVERTING}")
            self._copied = "staging"  # converted again below, in the types settled
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

    def _settle_rows(self, reading: FileReading, columns: Sequence[Column]) -> bool:
        """Keep what `stage_rows` COPYed when every row went, into the types settled."""
        kept = self._error is None and self._copied_rows == reading.rows
        if kept and self._copied == "table":
            kept = self._as_expected(columns)
        if not kept:
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
            formats = () if self._raw is None else self._raw.formats
            insert_from_staging(self._conn, self._table, self._staging, ordered, shapes, formats)
        elif self._copied is None:
            self._send_rows(ordered, batches)

    def _send_rows(self, ordered: Sequence[Column], batches: RowBatches) -> None:
        """COPY the rows as Python's CSV reader saw them, written out again: every stored
        type parses the file's own text, so only a missing value needs saying."""
        copy_rows(self._conn, self._table, ordered, batches)

    def abort(self) -> None:
        self._join()
