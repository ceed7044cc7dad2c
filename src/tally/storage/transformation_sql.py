"""A transformation's SELECT run as written (no parameters are bound to it): staged into
an output table, or previewed, within a time limit and a row limit. The query writes
itself (services/transformations' `CheckedQuery`) in the forms picked here for the
connection's backend (`sql_forms.forms_of`)."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, exc

from tally.core.columns import Column
from tally.core.errors import RunFailedError
from tally.storage.db_errors import failure_as_run_failed
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl, row_json
from tally.storage.sql_forms import forms_of
from tally.storage.sql_forms.forms import Forms
from tally.storage.sql_forms.postgresql import FAILED_MARK
from tally.storage.sql_functions import OVERFLOW, FunctionBudget, register_sql_functions

SQLITE_PROGRESS_STEPS = 10_000  # virtual machine steps between SQLite's time checks
Marks = Mapping[int, int] | None  # resource id -> the last row id read
Day = dt.date | None


class Query(Protocol):
    """A query that writes its SELECT in the forms it is given."""

    def statement(self, forms: Forms, *, after_row_ids: Marks = None, today: Day = None) -> str:
        """`after_row_ids` (resource id -> row id): only later rows of those inputs;
        `today`: CURRENT_DATE."""
        ...


def driver_text(conn: Connection, sql: str) -> str:
    """The statement for `exec_driver_sql`: psycopg reads `%` as the start of a
    placeholder everywhere, string literals included, so it is doubled there."""
    return sql.replace("%", "%%") if backend_of(conn).is_postgresql else sql


def fetch_query_rows(conn: Connection, sql: str) -> Sequence[Sequence[Any]]:
    """Every row of the SELECT, its values in the backend's stored forms."""
    return conn.exec_driver_sql(driver_text(conn, sql)).all()


def staging_connection(engine: Engine) -> Connection:
    """PostgreSQL's run connection: a write connection whose transaction reads one
    snapshot (REPEATABLE READ), so the row ids a run reads up to are those its INSERT
    ... SELECT saw. (SQLite runs read in a plain transaction, writing a staging file:
    services/transformations/runs.py.)"""
    conn = write_connection(engine)
    if backend_of(conn).is_postgresql:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    return conn


@contextmanager
def time_limit(
    conn: Connection, seconds: float, *, deadline: float | None = None
) -> Iterator[None]:
    """The statements run inside, in the caller's transaction, stopped after `seconds`
    (PostgreSQL's `statement_timeout`, SQLite's progress handler and the deadline its
    regular expression functions check at each call): RunFailedError. `deadline` (a
    `time.monotonic()`, by default `seconds` from now) is when: a preview's check spent
    part of its time already. SQLite's regular expression that cannot run (the pattern
    a column holds) is RunFailedError naming it; a value past int64 is RunFailedError in
    tally's words on both backends."""
    message = (
        f"the query ran longer than {seconds:g} s (TALLY_TRANSFORMATION_TIMEOUT_SECONDS): "
        "it was stopped, the previous output stays readable"
    )
    deadline = time.monotonic() + seconds if deadline is None else deadline
    if time.monotonic() > deadline:  # its check spent the time: nothing left to run
        raise RunFailedError(message)
    if backend_of(conn).is_postgresql:
        left = max(1, int((deadline - time.monotonic()) * 1000))
        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {left}")
        try:
            yield
        except exc.DBAPIError as error:
            sqlstate = getattr(error.orig, "sqlstate", None)
            if sqlstate == "57014":  # query_canceled
                raise RunFailedError(message) from None
            if sqlstate == "22003":  # numeric_value_out_of_range: the BIGINT cast of output
                raise RunFailedError(f"the query failed: {OVERFLOW}") from None
            failed = _conversion_failure(error) if sqlstate == "22P02" else None
            if failed is not None:
                raise RunFailedError(f"the query failed: {failed}") from None
            raise
        return
    driver = conn.connection.dbapi_connection
    assert isinstance(driver, sqlite3.Connection)
    budget = FunctionBudget(deadline)

    def check() -> int:
        return 1 if time.monotonic() > deadline else 0

    driver.set_progress_handler(check, SQLITE_PROGRESS_STEPS)
    register_sql_functions(driver, budget)
    try:
        yield
    except exc.OperationalError:
        if budget.failure is not None:
            raise RunFailedError(f"the query failed: {budget.failure}") from None
        if check():
            raise RunFailedError(message) from None
        raise
    finally:
        driver.set_progress_handler(None, 0)
        register_sql_functions(driver)


# Up to the message's closing parenthesis: the quotes around it are the server's
# language's (`"..."`, `»...«`).
_FAILED = re.compile(re.escape(FAILED_MARK) + r"(.*\))", re.DOTALL)


def _conversion_failure(error: exc.DBAPIError) -> str | None:
    """The message of a text that did not convert on PostgreSQL (sql_forms/postgresql's
    `_failed`: the cast of `tally-failed:<message>` to an integer that fails)."""
    diag = getattr(error.orig, "diag", None)
    primary = getattr(diag, "message_primary", None) or str(error.orig)
    found = _FAILED.search(primary)
    return found.group(1) if found else None


def _named(
    conn: Connection,
    query: Query,
    columns: Sequence[Column],
    after_row_ids: Mapping[int, int] | None = None,
    today: dt.date | None = None,
) -> str:
    """The query's SELECT in the forms of `conn`'s backend, its result columns renamed to
    their physical names, in order (as the driver reads it: the JSON text's labels,
    compiled with literal binds, have their `%` doubled for psycopg already)."""
    statement = query.statement(forms_of(conn), after_row_ids=after_row_ids, today=today)
    sql = driver_text(conn, statement)
    return f"WITH q ({', '.join(c.physical for c in columns)}) AS ({sql})"


def insert_rows(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    query: Query,
    *,
    after_row_ids: Mapping[int, int] | None = None,
    kept: int,
    max_rows: int,
    today: dt.date | None = None,
) -> int:
    """The query's rows (from the inputs' rows after `after_row_ids` only, if given)
    inserted into the empty row table `table` of `columns`, made without its primary key
    (`ddl.create_table(primary_key=False)`: on PostgreSQL it is added once the rows are
    in, one index build instead of a row-by-row upkeep, ~20 % of an 820k-row insert), row
    ids from 1 in the SELECT's order (SQLite numbers them itself, as the next row ids of
    an empty table: cheaper than ROW_NUMBER, which first copies every row aside), no
    JSON text (outputs keep none: storage/derived/outputs.py), `today` its CURRENT_DATE;
    how many. More than `max_rows` with the `kept` rows the output holds besides (an
    incremental run's published rows) is RunFailedError (the caller's transaction is
    rolled back)."""
    postgresql = backend_of(conn).is_postgresql
    names = ", ".join(c.physical for c in columns)
    values = ", ".join(f"o.{c.physical}" for c in columns)
    limited = f"SELECT * FROM q LIMIT {max(0, max_rows - kept) + 1}"
    if postgresql:
        targets, values = f"{ddl.ROW_ID}, {names}", f"o.{ddl.ROW_ID}, {values}"
        numbered = ", ".join(c.physical for c in columns)
        rows = f"(SELECT ROW_NUMBER() OVER () AS {ddl.ROW_ID}, {numbered} FROM ({limited}) n) o"
    else:
        targets, rows = names, f"({limited}) o"
    statement = (
        f"INSERT INTO {table} ({targets}) "
        f"{_named(conn, query, columns, after_row_ids, today)} "
        f"SELECT {values} FROM {rows}"
    )
    inserted = conn.exec_driver_sql(statement).rowcount
    if kept + inserted > max_rows:
        raise RunFailedError(
            f"the query gives more than {max_rows} rows (TALLY_TRANSFORMATION_MAX_ROWS): "
            "the previous output stays readable"
        )
    if postgresql:
        ddl.add_primary_key(conn, table)
    return int(inserted)


def append_rows(
    conn: Connection, source: str, target: str, columns: Sequence[Column], *, after_row_id: int
) -> int:
    """Every row of `source` (row ids 1..n) appended to `target` as stored (values and
    JSON text), its row ids moved after `after_row_id`; how many."""
    names = ", ".join([*(c.physical for c in columns), ddl.ROW_JSON])
    return int(
        conn.exec_driver_sql(
            f"INSERT INTO {target} ({ddl.ROW_ID}, {names}) "
            f"SELECT {ddl.ROW_ID} + {int(after_row_id)}, {names} FROM {source}"
        ).rowcount
    )


def copy_table(conn: Connection, source: str, target: str) -> None:
    """`target` created holding every row of `source` (a patch's few rows, moved from a
    staging file into the main database)."""
    conn.exec_driver_sql(f"CREATE TABLE {target} AS SELECT * FROM {source}")


def last_row_ids(conn: Connection, tables: Mapping[int, str]) -> dict[int, int]:
    """Each table's largest row id (0 when empty), by resource id."""
    return {
        resource_id: int(
            conn.exec_driver_sql(f"SELECT COALESCE(MAX({ddl.ROW_ID}), 0) FROM {table}").scalar()
            or 0
        )
        for resource_id, table in tables.items()
    }


def same_rows(conn: Connection, staged: str, published: str, columns: Sequence[Column]) -> bool:
    """Whether every staged row equals the published row of its row id in every column
    (NULL only to NULL): with as many rows on each side, the two hold the same output.
    A join on the row id key that stops at the first difference: cheaper than hashing
    both tables, and nothing to keep between runs."""
    same = " IS NOT DISTINCT FROM " if backend_of(conn).is_postgresql else " IS "
    equal = " AND ".join(f"n.{c.physical}{same}p.{c.physical}" for c in columns) or "TRUE"
    differs = conn.exec_driver_sql(
        f"SELECT 1 FROM {staged} n LEFT JOIN {published} p ON p.{ddl.ROW_ID} = n.{ddl.ROW_ID} "
        f"WHERE p.{ddl.ROW_ID} IS NULL OR NOT ({equal}) LIMIT 1"
    ).first()
    return differs is None


def interrupter(conn: Connection) -> Callable[[], None]:
    """What stops the statement `conn` is running, from another thread (a stopping
    process's previews): PostgreSQL's cancel request, SQLite's interrupt. Either fails
    the statement; between statements it does nothing."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    stop: Callable[[], None] = (
        driver.cancel_safe if backend_of(conn).is_postgresql else driver.interrupt
    )

    def interrupt() -> None:
        # A connection already broken (a server gone) has nothing left to stop, and a
        # stopping process must not fail on it.
        with suppress(Exception):
            stop()

    return interrupt


def preview_rows(
    conn: Connection,
    columns: Sequence[Column],
    query: Query,
    limit: int,
    *,
    seconds: float,
    deadline: float,
    today: dt.date | None = None,
) -> list[str]:
    """The query's first `limit` rows as their JSON object text (as a page shows them),
    within `time_limit`; any failure of the query is RunFailedError
    (`failure_as_run_failed`); `today` is its CURRENT_DATE."""
    postgresql = backend_of(conn).is_postgresql
    rendered = row_json.row_text(columns, "o.", postgresql=postgresql)
    json_sql = str(rendered.compile(conn, compile_kwargs={"literal_binds": True}))
    named = _named(conn, query, columns, today=today)
    statement = f"{named} SELECT {json_sql} FROM (SELECT * FROM q LIMIT {int(limit)}) o"
    with failure_as_run_failed(), time_limit(conn, seconds, deadline=deadline):
        return [str(row[0]) for row in conn.exec_driver_sql(statement)]
