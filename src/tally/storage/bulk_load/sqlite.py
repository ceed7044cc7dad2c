"""SQLite's bulk load: the checked rows appended by one `executemany` per batch, converted
in SQL; for a large file, the raw rows staged while another process checks them, then
converted by one INSERT ... SELECT."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Connection

from tally.core.columns import Column, ColumnType, canonical_timestamp
from tally.storage.bulk_load.interface import (
    BulkLoad,
    Expected,
    FileReading,
    RowBatches,
    ValueShape,
)
from tally.storage.resource_tables.ddl import with_file_id


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
        file_id: int | None = None,
    ) -> None:
        shaped = [(c, shapes.get(c.physical, ValueShape())) for c in ordered]
        self._canonicalise = [
            i
            for i, (c, shape) in enumerate(shaped)
            if c.type is ColumnType.TIMESTAMP and not shape.plain_timestamps
        ]
        names, values = with_file_id(
            ", ".join(c.physical for c in ordered),
            ", ".join(
                _sqlite_expression(c, f"?{i + 1}", shape) for i, (c, shape) in enumerate(shaped)
            ),
            file_id,
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


class SqliteBulkLoad(BulkLoad):
    """SQLite: while another process checks the file, this one copies the raw rows into
    a temporary table (SQLite has no COPY; a plain `executemany` of text is its fastest
    insert); once the types are known, one INSERT ... SELECT converts them."""

    stages_rows = True

    def __init__(self, conn: Connection, table: str, *, file_id: int | None = None) -> None:
        super().__init__(conn, table)
        self._staging = f"staging_{table}"
        self._staged_rows: int | None = None
        self._file_id = file_id

    def stage_rows(self, batches: RowBatches, width: int, expected: Expected | None = None) -> None:
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
            self._append_batches(ordered, shapes, batches)
            return
        names, values = with_file_id(
            ", ".join(c.physical for c in ordered),
            ", ".join(_sqlite_expression(c, f"s{i}", shape) for i, (c, shape) in enumerate(shaped)),
            self._file_id,
        )
        self._conn.exec_driver_sql(
            f"INSERT INTO {self._table} ({names}) SELECT {values} "
            f"FROM temp.{self._staging} ORDER BY rowid"
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
            self._conn.exec_driver_sql(f"DROP TABLE IF EXISTS temp.{self._staging}")
            self._staged_rows = None

    def abort(self) -> None:
        """Called when the load ends, whichever way."""
        self._drop_staging()
