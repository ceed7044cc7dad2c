"""Rows rendered to their JSON object text by the database (the SQL both a page and the
backfill use), and `store_row_json`, the worker's backfill of each row's `_json`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from tally.core.columns import Column, ColumnType
from tally.storage.engine import not_pooled, write_connection, yield_to_writers
from tally.storage.resource_tables.ddl import ROW_ID, ROW_JSON

ROW_JSON_BATCH_ROWS = 50_000  # rows given their JSON text per transaction (PostgreSQL)
# SQLite: each batch holds the one write lock (~0.4 s for 50,000 rows of a 1M-row table
# on a slow machine; ~0.1 s for 10,000), and writers waiting for it go between two
SQLITE_ROW_JSON_BATCH_ROWS = 10_000
# json_object / json_build_object take at most ~100 arguments: build wider rows in chunks.
JSON_CHUNK_COLUMNS = 40
PG_MAX_IDENTIFIER_BYTES = 63  # longer names are truncated by PostgreSQL


def _json_value_sql(column: Column, ref: str, postgresql: bool) -> str:
    """SQL text rendering one stored value as its JSON value (exact decimals, with the
    column's number of fractional digits)."""
    if postgresql:
        if column.type is ColumnType.TIMESTAMP and column.timezone:
            # DateStyle ISO (set on every connection): 'YYYY-MM-DD HH:MM:SS[.ffffff]'
            return f"(replace(({ref} AT TIME ZONE 'UTC')::text, ' ', 'T') || 'Z')"
        return ref  # JSON renders a TIMESTAMP as 'YYYY-MM-DDTHH:MM:SS[.ffffff]'
    if column.type is ColumnType.DECIMAL and column.scale:
        return f"json({_sqlite_decimal_text(column, ref)})"
    if column.type is ColumnType.BOOLEAN:
        return f"json(CASE WHEN {ref} THEN 'true' WHEN NOT {ref} THEN 'false' END)"
    if column.type is ColumnType.TIMESTAMP and column.timezone:
        return f"({ref} || 'Z')"
    return ref


def _sqlite_decimal_text(column: Column, ref: str) -> str:
    """SQLite: a scaled integer as its decimal text, with the column's digits."""
    unit = 10**column.scale
    # printf on integers: exact, and twice as fast as string arithmetic.
    digits = f"%d.%0{column.scale}d"
    return (
        f"CASE WHEN {ref} IS NULL THEN NULL WHEN {ref} < 0"
        f" THEN printf('-{digits}', -{ref} / {unit}, -{ref} % {unit})"
        f" ELSE printf('{digits}', {ref} / {unit}, {ref} % {unit}) END"
    )


def text_value_sql(column: Column, ref: str, *, postgresql: bool) -> str:
    """SQL text giving a stored value as the text the Data API shows for it (a
    decimal with its column's digits, a timestamp in ISO form); NULL stays NULL."""
    kind = column.type
    if kind is ColumnType.TEXT or kind is ColumnType.DATE:
        return ref
    if kind is ColumnType.BOOLEAN:
        return f"CASE WHEN {ref} THEN 'true' WHEN NOT {ref} THEN 'false' END"
    if kind is ColumnType.DECIMAL and column.scale and not postgresql:
        return _sqlite_decimal_text(column, ref)
    if kind is ColumnType.TIMESTAMP:
        if not postgresql:
            return f"({ref} || 'Z')" if column.timezone else ref
        if column.timezone:
            return f"(replace(({ref} AT TIME ZONE 'UTC')::text, ' ', 'T') || 'Z')"
        return f"replace({ref}::text, ' ', 'T')"
    return f"CAST({ref} AS TEXT)"


def _json_object(
    fields: Sequence[Column],
    prefix: str,
    postgresql: bool,
) -> sa.ColumnElement[Any]:
    """One JSON object text per row; labels are bound parameters, never SQL text."""
    chunks: list[sa.ColumnElement[Any]] = []
    for start in range(0, len(fields), JSON_CHUNK_COLUMNS):
        args: list[sa.ColumnElement[Any]] = []
        for column in fields[start : start + JSON_CHUNK_COLUMNS]:
            key = sa.literal(column.name, sa.Text)
            args += [
                sa.cast(key, sa.Text) if postgresql else key,
                sa.literal_column(
                    _json_value_sql(column, f"{prefix}{column.physical}", postgresql)
                ),
            ]
        chunk = (
            sa.cast(sa.func.json_build_object(*args), sa.Text)
            if postgresql
            else sa.func.json_object(*args)
        )
        chunks.append(chunk)
    if len(chunks) == 1:
        return chunks[0]
    # Stitch chunk objects: {"a":1} {"b":2} -> {"a":1,"b":2}. Values are scalars, so
    # each chunk has exactly one brace at each end.
    joined: sa.ColumnElement[Any] = sa.func.rtrim(chunks[0], "}")
    for middle in chunks[1:-1]:
        joined = joined.concat(",").concat(sa.func.trim(middle, "{}"))
    return joined.concat(",").concat(sa.func.ltrim(chunks[-1], "{"))


def _labelled_values(fields: Sequence[Column], prefix: str) -> sa.Select[Any] | None:
    """PostgreSQL: the row's JSON values as a row whose columns are labelled with the
    field names, for `row_to_json`; None when a name is longer than an identifier (63
    bytes) and cannot be a label (json_build_object renders such rows)."""
    if any(len(c.name.encode()) > PG_MAX_IDENTIFIER_BYTES for c in fields):
        return None
    values: list[sa.ColumnElement[Any]] = [
        sa.literal_column(_json_value_sql(c, f"{prefix}{c.physical}", True)).label(c.name)
        for c in fields
    ]
    return sa.select(*values)


def rendered_rows(
    source: sa.TableClause | sa.Subquery,
    fields: Sequence[Column],
    prefix: str,
    postgresql: bool,
    stored: bool,
) -> tuple[sa.ColumnElement[Any], sa.FromClause]:
    """Each row's JSON object text, and the FROM clause it needs; with `stored` (the
    page shows whole rows) the row's stored text where it has one.

    PostgreSQL: `row_to_json` of a LATERAL row whose columns are labelled with the field
    names. json_build_object looks up the type of every argument on every row; measured
    on 1000-row pages, row_to_json costs the server ~20 % less. COALESCE evaluates its
    second argument only for a row without stored text, on both backends (measured: a
    1000-row page whose rows all have it costs what reading the column costs)."""
    labelled = _labelled_values(fields, prefix) if postgresql else None
    rows_from: sa.FromClause = source
    if labelled is None:
        rendered = _json_object(fields, prefix, postgresql)
    else:
        lateral = labelled.lateral("row_values")
        rendered = sa.cast(sa.func.row_to_json(lateral.table_valued()), sa.Text)
        rows_from = source.join(lateral, sa.true())
    if stored:
        rendered = sa.func.coalesce(sa.literal_column(f"{prefix}{ROW_JSON}"), rendered)
    return rendered, rows_from


def row_text(columns: Sequence[Column], prefix: str, *, postgresql: bool) -> sa.ColumnElement[Any]:
    """The JSON text stored for a row whose stored values are `{prefix}{physical}`: what
    `store_row_json` writes, and what the few rows of a derived output's in-place
    patch store as they are inserted."""
    labelled = _labelled_values(columns, prefix) if postgresql else None
    if labelled is None:
        return _json_object(columns, prefix, postgresql)
    values = labelled.subquery("row_values")
    return sa.select(sa.cast(sa.func.row_to_json(values.table_valued()), sa.Text)).scalar_subquery()


def store_row_json(
    engine: Engine,
    table: str,
    columns: Sequence[Column],
    guard: Callable[[Connection], None] | None = None,
) -> int:
    """Give every row without stored JSON text its text, as a page would render it; the
    number of rows given one. Runs in transactions of `ROW_JSON_BATCH_ROWS` rows
    (SQLite: fewer, each after the writers waiting for the lock), so a large table
    never holds SQLite's write lock for long; `guard` runs first in each
    (a derived run's lease). Safe beside any writer: each batch renders the values the
    row has when it is written (a row whose values change meanwhile has its text
    cleared by that change, or, on PostgreSQL, is rendered again from its new version
    by the UPDATE itself)."""
    postgresql = engine.dialect.name == "postgresql"
    text = row_text(columns, f"{table}.", postgresql=postgresql)
    row_id: sa.ColumnClause[Any] = sa.column(ROW_ID)
    row_json: sa.ColumnClause[Any] = sa.column(ROW_JSON)
    source = sa.table(table, row_id, row_json)
    bounds = sa.select(sa.func.min(row_id), sa.func.max(row_id)).select_from(source)
    with engine.connect() as conn:
        low, high = conn.execute(bounds.where(row_json.is_(None))).one()
    if low is None:
        return 0
    stored = 0
    rows = ROW_JSON_BATCH_ROWS if postgresql else SQLITE_ROW_JSON_BATCH_ROWS
    # one connection for every batch, closed after on PostgreSQL (it read the table)
    with not_pooled(write_connection(engine)) as conn:
        for start in range(low, high + 1, rows):
            batch = (
                sa.update(source)
                .where(row_id >= start, row_id < start + rows, row_json.is_(None))
                .values({ROW_JSON: text})
            )
            yield_to_writers(conn)  # what `job_step` does, on the same connection
            with conn.begin():
                if guard is not None:
                    guard(conn)
                stored += conn.execute(batch).rowcount
    return stored
