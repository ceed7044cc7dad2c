"""The Data API's page and count statements over a row table: filter terms, orderings,
start keys (checkpoints), and each page shape's statement built once and reused."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql as pg_types

from tally.core.columns import Column
from tally.core.filters import Condition, Operator, Ordering, RowQuery
from tally.storage.engine import backend_of
from tally.storage.resource_tables.csv_lines import csv_line_sql
from tally.storage.resource_tables.ddl import ROW_ID, ROW_JSON, row_table
from tally.storage.resource_tables.row_json import rendered_rows
from tally.storage.resource_tables.stored_types import bind_type, stored_value
from tally.storage.resource_tables.text_search import contains, like_pattern

PAGE_STATEMENTS = 256  # page statements kept per process, one per query shape

# A filter term's shape: the column, the operator and whether it has values. The SQL of
# a term depends on its shape only; its values travel as bound parameters.
Term = tuple[Column, Operator, bool]


def _terms(conditions: Sequence[Condition]) -> tuple[Term, ...]:
    return tuple((c.column, c.op, bool(c.values)) for c in conditions)


def _condition(col: sa.ColumnClause[Any], term: Term, name: str) -> sa.ColumnElement[bool]:
    """One filter term; its values are the bound parameter `name` (a list for IN), so a
    statement serves every request of the same shape (see `_condition_values`)."""
    column, op, has_values = term
    if op == Operator.CONTAINS:
        return contains(col, sa.bindparam(name, type_=sa.Text()))
    # Typed by the column: SQLAlchemy refuses `col > True` with an untyped True.
    expanding = op in (Operator.IN, Operator.IN_OR_NULL)
    value = sa.bindparam(name, type_=bind_type(column), expanding=expanding)
    if op == Operator.EQ:
        return col == value
    if op == Operator.IN:
        return col.in_(value)
    if op == Operator.IN_OR_NULL:
        return sa.or_(col.in_(value), col.is_(None)) if has_values else col.is_(None)
    if op == Operator.IS_NULL:
        return col.is_(None)
    if op == Operator.IS_NOT_NULL:
        return col.is_not(None)
    if op == Operator.NEVER:
        return sa.false()
    return {
        Operator.GT: col > value,
        Operator.GTE: col >= value,
        Operator.LT: col < value,
        Operator.LTE: col <= value,
    }[op]


def _condition_values(conditions: Sequence[Condition]) -> dict[str, Any]:
    """The bound values of `_where`'s terms, by parameter name."""
    values: dict[str, Any] = {}
    for n, condition in enumerate(conditions):
        if condition.op in (Operator.IN, Operator.IN_OR_NULL):
            if condition.values:
                values[f"filter_{n}"] = list(condition.values)
        elif condition.op == Operator.CONTAINS:
            values[f"filter_{n}"] = like_pattern(condition.values[0])
        elif condition.values:
            values[f"filter_{n}"] = condition.values[0]
    return values


def _where(
    table: sa.TableClause, terms: Sequence[Term], *, without_indexes: bool = False
) -> list[sa.ColumnElement[bool]]:
    """The WHERE terms. `without_indexes` (SQLite) writes `+col`, which keeps SQLite from
    searching an index for that term: for a broad filter, reading the table in row order
    and stopping after one page beats collecting every match through an index and sorting.
    Never for the row id (`_row`): its range is where that very scan starts and stops."""

    def column(physical: str) -> sa.ColumnClause[Any]:
        if without_indexes and physical != ROW_ID:
            return sa.literal_column(f"+{physical}")
        return table.c[physical]

    return [_condition(column(t[0].physical), t, f"filter_{n}") for n, t in enumerate(terms)]


def _order_by(
    table: sa.TableClause | sa.Subquery,
    ordering: Ordering,
    postgresql: bool,
) -> list[sa.UnaryExpression[Any]]:
    row_id = table.c[ROW_ID]
    if ordering.column is None:
        return [row_id.desc() if ordering.descending else row_id.asc()]
    col = table.c[ordering.column.physical]
    if ordering.descending:
        key = col.desc().nulls_last() if postgresql else col.desc()
        return [key, row_id.desc()]
    key = col.asc().nulls_first() if postgresql else col.asc()
    return [key, row_id.asc()]


@dataclass(frozen=True)
class RowKey:
    """Where a row sits in an ordering: its ordering value (stored form) and row id."""

    value: Any
    row_id: int


@dataclass(frozen=True)
class Page:
    rows: list[str]  # JSON object texts
    # offset -> key of the row just before it: a later request for that offset can
    # start right after the key instead of counting its way there again.
    checkpoints: dict[int, RowKey]


@dataclass(frozen=True)
class CsvPage:
    """A page whose rows are their CSV lines (`csv_lines`), without line ends: a CSV
    export's chunk."""

    lines: list[str]
    checkpoints: dict[int, RowKey]


def _after(
    source: sa.TableClause, ordering: Ordering, null_key: bool, missing_follow: bool
) -> sa.ColumnElement[bool]:
    """Rows that come after the key bound as `after_value` (unless `null_key`: the key's
    value is missing, and missing values are the smallest) and `after_row_id`.
    `missing_follow`: rows whose value is missing may come after a descending key (the
    column has some); without them the condition is a plain seek in the index."""
    row_id = source.c[ROW_ID]
    after_id = sa.bindparam("after_row_id", type_=sa.BigInteger())
    if ordering.column is None:
        return row_id < after_id if ordering.descending else row_id > after_id
    col = source.c[ordering.column.physical]
    here = sa.tuple_(col, row_id)
    key = sa.tuple_(sa.bindparam("after_value", type_=col.type), after_id)
    if ordering.descending:
        if null_key:
            return sa.and_(col.is_(None), row_id < after_id)
        return sa.or_(here < key, col.is_(None)) if missing_follow else here < key
    if null_key:
        return sa.or_(sa.and_(col.is_(None), row_id > after_id), col.is_not(None))
    return here > key


@dataclass(frozen=True)
class _PageShape:
    """Everything a page statement's SQL depends on; the values travel as parameters."""

    table: str
    columns: tuple[Column, ...]
    fields: tuple[Column, ...]
    ordering: Ordering
    terms: tuple[Term, ...]
    after: bool | None  # None: no start key; else whether the key's value is missing
    missing_follow: bool  # see _after
    hinted: bool
    postgresql: bool
    direct: bool  # read and render the page's rows in one scan (see _reads_directly)
    stored: bool  # whole rows: their stored JSON text where they have it
    as_csv: bool = False  # the row's CSV line, not its JSON object


def select_page(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    query: RowQuery,
    *,
    offset: int,
    limit: int,
    matching: int,
    scan_in_row_order: bool = False,
    start: tuple[int, RowKey] | None = None,
    missing_follow: bool = True,
) -> Page:
    """The page's rows as JSON object texts: see `_select`."""
    found, checkpoints = _select(
        conn, table, columns, query, offset=offset, limit=limit, matching=matching,
        scan_in_row_order=scan_in_row_order, start=start, missing_follow=missing_follow,
    )  # fmt: skip
    return Page([row[0] for row in found], checkpoints)


def select_csv_page(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    query: RowQuery,
    *,
    offset: int,
    limit: int,
    matching: int,
    start: tuple[int, RowKey] | None = None,
    missing_follow: bool = True,
) -> CsvPage:
    """The page's rows as their CSV lines, each made by the database: see `_select`."""
    found, checkpoints = _select(
        conn, table, columns, query, offset=offset, limit=limit, matching=matching,
        start=start, missing_follow=missing_follow, as_csv=True,
    )  # fmt: skip
    return CsvPage([row[0] for row in found], checkpoints)


def _select(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    query: RowQuery,
    *,
    offset: int,
    limit: int,
    matching: int,
    scan_in_row_order: bool = False,
    start: tuple[int, RowKey] | None = None,
    missing_follow: bool = True,
    as_csv: bool = False,
) -> tuple[list[Sequence[Any]], dict[int, RowKey]]:
    """`limit` rows of the query from `offset` (its page, or a part of the page), each
    already rendered (a JSON object text, or with `as_csv` its CSV line), and the
    checkpoints they give.

    First the page's keys are chosen (from an index alone where one covers the
    ordering, so a deep OFFSET walks index entries, not rows), starting after `start`
    (a checkpoint at an offset at or before the page) when one is known; then only the
    page's rows are read and rendered. `missing_follow`: the ordering column may hold
    missing values (see `has_missing_values`; without them a descending start key is a
    plain seek).
    """
    postgresql = backend_of(conn).is_postgresql
    hinted = scan_in_row_order and not postgresql and query.ordering.column is None
    params = _condition_values(query.conditions)
    base = 0
    if start is not None:
        base, key = start
        params["after_row_id"] = key.row_id
        if key.value is not None:
            params["after_value"] = key.value
    skip = offset - base
    # One row more, before the page, gives the checkpoint for this very offset.
    first = max(skip - 1, 0)
    params["page_limit"] = limit + (skip - first)
    params["page_offset"] = first
    shape = _PageShape(
        table,
        tuple(columns),
        query.fields,
        query.ordering,
        _terms(query.conditions),
        None if start is None else start[1].value is None,
        missing_follow,
        hinted,
        postgresql,
        _reads_directly(query, start, first, matching - offset <= limit, missing_follow),
        not as_csv and tuple(query.fields) == tuple(columns),
        as_csv,
    )
    found, type_codes = _driver_rows(conn, _page_statement(shape), params)

    def key_of(row: Sequence[Any]) -> RowKey:
        """(rendered..., [ordering value,] row id) -> the row's key, its value in
        stored form."""
        if query.ordering.column is None:
            return RowKey(None, row[-1])
        value = stored_value(conn, query.ordering.column, row[-2], type_codes[-2])
        return RowKey(value, row[-1])

    checkpoints: dict[int, RowKey] = {}
    if skip > 0 and found:
        checkpoints[offset] = key_of(found.pop(0))
    elif start is not None and skip == 0:
        checkpoints[offset] = start[1]
    if found:
        checkpoints[offset + len(found)] = key_of(found[-1])
    return found, checkpoints


def _driver_rows(
    conn: Connection, stmt: sa.Select[Any], params: dict[str, Any]
) -> tuple[list[Sequence[Any]], list[Any]]:
    """The statement's rows as the driver returns them, not as SQLAlchemy Rows: a page
    needs each row's JSON text and one or two rows' keys (`stored_value`), and a Row
    per rendered row cost the query process 0.26-0.34 ms a 1000-row page on SQLite
    (Q5 3.44 -> 3.10 ms a request) and 0.16 ms of CPU on PostgreSQL. Driver errors are
    wrapped as SQLAlchemy's own, as `Connection.execute` does, for `translated_errors`.
    Also returns each column's driver type code (what SQLAlchemy's result processors
    take)."""
    result = conn.execute(stmt, params)
    driver_error = conn.dialect.loaded_dbapi.Error
    try:
        type_codes = [column[1] for column in result.cursor.description]
        return list(result.cursor.fetchall()), type_codes
    except driver_error as error:
        raise sa.exc.DBAPIError.instance(None, None, error, driver_error) from error
    finally:
        result.close()


def _reads_directly(
    query: RowQuery,
    start: tuple[int, RowKey] | None,
    offset: int,
    rest_fits: bool,
    missing_follow: bool,
) -> bool:
    """May the page be read in one scan, each row rendered as it comes? Only when no
    row would be rendered in vain: no rows to walk past, and either no filter (the scan
    is an index walk in page order that stops after the page) or every remaining match
    on this page (a filter's index may be searched and its matches sorted: all of them
    are the page). A start key must be a plain seek, not a key OR NULLs (a descending
    key over a column with missing values: `missing_follow`). Otherwise the
    page's row ids are chosen first and only those rows read and rendered. Measured: a
    1000-row first page on PostgreSQL 4.1 ms in two steps, 3.1 ms in one; Q5's 790
    matches on SQLite 2.6 ms, 2.2 ms."""
    if offset or (query.conditions and not rest_fits):
        return False
    if start is None or query.ordering.column is None:
        return True
    if start[1].value is None:
        return False
    return not (query.ordering.descending and missing_follow)


@functools.lru_cache(maxsize=PAGE_STATEMENTS)
def _page_statement(shape: _PageShape) -> sa.Select[Any]:
    """The page statement of a shape, built once: building it and its cache key cost
    SQLAlchemy about as much as SQLite spends rendering a 1000-row page. The statement
    object is reused, so SQLAlchemy's compiled form is found without a new cache key."""
    source = row_table(shape.table, shape.columns)
    where = _where(source, shape.terms, without_indexes=shape.hinted)
    if shape.after is not None:
        where.append(_after(source, shape.ordering, shape.after, shape.missing_follow))
    ordered = [source.c[ROW_ID]]
    if shape.ordering.column is not None:
        ordered.insert(0, source.c[shape.ordering.column.physical])
    order = _order_by(source, shape.ordering, shape.postgresql)
    rendered, rows_from = _rendered(source, shape)
    rows = sa.select(*rendered, *ordered).select_from(rows_from)
    if shape.direct:
        return _one_page(rows.where(*where).order_by(*order))
    if shape.postgresql and _reads_heap_to_choose(shape):
        return _rendered_after_choosing(source, shape, where, order)
    page_ids = _one_page(sa.select(source.c[ROW_ID]).where(*where).order_by(*order))
    return rows.where(_row_id_among(source, page_ids, shape.postgresql)).order_by(*order)


def _rendered_after_choosing(
    source: sa.TableClause,
    shape: _PageShape,
    where: Sequence[sa.ColumnElement[bool]],
    order: Sequence[sa.UnaryExpression[Any]],
) -> sa.Select[Any]:
    """PostgreSQL, when choosing the page's rows reads the rows themselves anyway: the
    chosen rows' values carried out of the choice (a LIMIT subquery named as the table,
    so the rendering SQL reads its columns), each rendered once, after the LIMIT. Before,
    the choice handed over the rows' addresses (ctid) and a TID scan read them again:
    Q3's page cost the server ~0.3 ms more (3.4 against 3.1 ms a request, 1M rows)."""
    physical = dict.fromkeys(
        [ROW_ID, *(c.physical for c in shape.fields)]
        + ([shape.ordering.column.physical] if shape.ordering.column is not None else [])
    )
    carried: list[sa.ColumnElement[Any]] = [source.c[name] for name in physical]
    if shape.stored:
        carried.append(sa.literal_column(f"{shape.table}.{ROW_JSON}").label(ROW_JSON))
    chosen = _one_page(sa.select(*carried).where(*where).order_by(*order)).subquery(shape.table)
    rendered, rows_from = _rendered(chosen, shape)
    ordered = [chosen.c[ROW_ID]]
    if shape.ordering.column is not None:
        ordered.insert(0, chosen.c[shape.ordering.column.physical])
    rows = sa.select(*rendered, *ordered).select_from(rows_from)
    return rows.order_by(*_order_by(chosen, shape.ordering, shape.postgresql))


def _rendered(
    source: sa.TableClause | sa.Subquery, shape: _PageShape
) -> tuple[list[sa.ColumnElement[Any]], sa.FromClause]:
    """What a page selects of each row (before its key), and the FROM clause it needs."""
    prefix = f"{shape.table}."
    if shape.as_csv:
        line = csv_line_sql(shape.fields, prefix, postgresql=shape.postgresql)
        return [sa.literal_column(line)], source
    rendered, rows_from = rendered_rows(
        source, shape.fields, prefix, shape.postgresql, shape.stored
    )
    return [rendered], rows_from


def _reads_heap_to_choose(shape: _PageShape) -> bool:
    """Does choosing the page's rows read the rows themselves anyway? Then PostgreSQL
    can carry the chosen rows' values out of the choice (`_rendered_after_choosing`).
    Not when every filter is on the ordering column: an index alone may choose them
    then (an index-only scan), and asking for the values would read every row walked
    past."""
    ordering = shape.ordering.column
    return any(term[0] != ordering for term in shape.terms)


def _one_page(stmt: sa.Select[Any]) -> sa.Select[Any]:
    """The statement limited to the page, its bounds bound as parameters."""
    return stmt.limit(sa.bindparam("page_limit", type_=sa.Integer())).offset(
        sa.bindparam("page_offset", type_=sa.Integer())
    )


def _row_id_among(
    source: sa.TableClause, page_ids: sa.Select[Any], postgresql: bool
) -> sa.ColumnElement[bool]:
    """`_row_id IN (page ids)`. PostgreSQL is given the ids as an array: for `IN
    (subquery)` with thousands of ids it hashes them and scans the whole table."""
    row_id = source.c[ROW_ID]
    if postgresql:
        return row_id == sa.any_(sa.func.array(page_ids.scalar_subquery()))
    return row_id.in_(page_ids.scalar_subquery())


def has_missing_values(conn: Connection, table: str, column: Column) -> bool:
    """Does any row lack a value in `column`? One index probe (missing values come
    first in its index)."""
    col: sa.ColumnClause[Any] = sa.column(column.physical)
    stmt = sa.select(sa.literal(1)).select_from(sa.table(table, col)).where(col.is_(None))
    return conn.execute(stmt.limit(1)).first() is not None


def count_rows(conn: Connection, table: str, columns: Sequence[Column], query: RowQuery) -> int:
    source = row_table(table, columns)
    where = _where(source, _terms(query.conditions))
    stmt = sa.select(sa.func.count()).select_from(source).where(*where)
    return int(conn.execute(stmt, _condition_values(query.conditions)).scalar_one())


@dataclass(frozen=True)
class _RowsShape:
    table: str
    columns: tuple[Column, ...]
    fields: tuple[Column, ...]
    postgresql: bool


def rows_by_id(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    fields: Sequence[Column],
    row_ids: Sequence[int],
) -> list[str]:
    """The JSON object texts of the rows `row_ids`, in that order: a page whose rows
    were chosen elsewhere (a column snapshot, decision 0014), read in the caller's
    transaction."""
    if not row_ids:
        return []
    postgresql = backend_of(conn).is_postgresql
    shape = _RowsShape(table, tuple(columns), tuple(fields), postgresql)
    # One text parameter: on SQLite a JSON array (json_each), not an expanding IN list,
    # which SQLAlchemy re-renders into new SQL on every call (~1.5 ms a 1000-row page);
    # on PostgreSQL an array literal, which psycopg passes as it is (dumping a list of
    # 1000 ints as an array cost ~0.9 ms).
    listed = ",".join(map(str, row_ids))
    ids = f"{{{listed}}}" if postgresql else f"[{listed}]"
    found, _ = _driver_rows(conn, _rows_statement(shape), {"row_ids": ids})
    text_of = {row[1]: row[0] for row in found}
    return [text_of[row_id] for row_id in row_ids]


@functools.lru_cache(maxsize=PAGE_STATEMENTS)
def _rows_statement(shape: _RowsShape) -> sa.Select[Any]:
    source = row_table(shape.table, shape.columns)
    stored = shape.fields == shape.columns
    rendered, rows_from = rendered_rows(
        source, shape.fields, f"{shape.table}.", shape.postgresql, stored
    )
    row_id = source.c[ROW_ID]
    if shape.postgresql:
        ids = sa.cast(sa.bindparam("row_ids", type_=sa.Text()), pg_types.ARRAY(sa.BigInteger()))
        chosen = row_id == sa.any_(ids)
    else:
        listed = sa.func.json_each(sa.bindparam("row_ids", type_=sa.Text()))
        chosen = row_id.in_(sa.select(sa.literal_column("value")).select_from(listed))
    return sa.select(rendered, row_id).select_from(rows_from).where(chosen)
