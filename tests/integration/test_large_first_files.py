"""A placeholder's large first file on SQLite: written, while a second process checks
it, straight into the table to be published as its head suggests (`FillTarget`,
`StagedFile.in_table`), kept only when the checks settle the same columns; without a
guess, staged as its text and converted as it is copied (`StagedFile.converted_by`).
Against the other paths: the same exact values read back on both backends whichever
path a file takes, and a bad file leaves nothing. The size from which a file is
checked by a second process (`PARALLEL_CHECK_MIN_BYTES`, 32 MiB) is lowered here, so
small files take those paths.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from support.databases import BACKENDS
from support.factories import Tenant, count_resources, read_data, write_file
from tally.core.columns import Column, ColumnType
from tally.core.errors import LoadError
from tally.core.limits import DEFAULT_FILE_LIMITS
from tally.runtime import Runtime
from tally.services.loader import staged
from tally.services.loader.reader import BATCH_ROWS
from tally.services.loader.staged import FillTarget, StagedFile, stage_file
from tally.storage import staging
from tally.storage.bulk_load.interface import ValueShape
from tally.storage.bulk_load.sqlite import FILL_TRANSACTION_ROWS, ROWS_PER_STATEMENT, SqliteAppender
from tally.storage.engine import write_connection
from tally.storage.resource_tables.ddl import create_table
from tally.storage.resources import find_resource

# staging outside the write lock is SQLite's (decision 0013); PostgreSQL loads in one
SQLITE = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "sqlite"])
# every conversion SQL does alone: integers, decimals of one scale and of several, with
# empty values or none, booleans, dates, plain timestamps, text
PLAIN = (
    "id,amount,rate,flag,day,at,note,count\n"
    "1,10.50,1.5,true,2024-01-05,2024-01-05 10:30:00,a,\n"
    "2,-0.01,2,FALSE,,2024-01-06T11:00:00,,7\n"
    '3,,-0.125,,2024-02-29,,"b, ""c""",8\n'
    "9223372036854775807,12345678901234567.89,0,True,2024-12-31,2024-12-31T23:59:59,d,9\n"
)
EXPECTED = [
    {
        "id": 1,
        "amount": Decimal("10.50"),
        "rate": Decimal("1.500"),
        "flag": True,
        "day": "2024-01-05",
        "at": "2024-01-05T10:30:00",
        "note": "a",
        "count": None,
    },
    {
        "id": 2,
        "amount": Decimal("-0.01"),
        "rate": Decimal("2.000"),
        "flag": False,
        "day": None,
        "at": "2024-01-06T11:00:00",
        "note": None,
        "count": 7,
    },
    {
        "id": 3,
        "amount": None,
        "rate": Decimal("-0.125"),
        "flag": None,
        "day": "2024-02-29",
        "at": None,
        "note": 'b, "c"',
        "count": 8,
    },
    {
        "id": 9223372036854775807,
        "amount": Decimal("12345678901234567.89"),
        "rate": Decimal("0.000"),
        "flag": True,
        "day": "2024-12-31",
        "at": "2024-12-31T23:59:59",
        "note": "d",
        "count": 9,
    },
]
# a timestamp with an offset is converted in Python: such a file is converted in staging
OFFSETS = "id,at\n1,2024-01-05T10:30:00+02:00\n2,2024-01-05T10:30:00Z\n"


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file staged beside a second process that checks it, as a large one is."""
    monkeypatch.setattr(staged, "PARALLEL_CHECK_MIN_BYTES", 0)


def load(runtime: Runtime, tenant: Tenant, content: str, name: str) -> int:
    path = write_file(content)
    try:
        return runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name=name, path=path
        ).resource.id
    finally:
        path.unlink()


def rows_of(runtime: Runtime, tenant: Tenant, resource_id: int) -> list[dict[str, Any]]:
    body = read_data(runtime, tenant, resource_id, ordering="_row", page_size=100)
    return [{k: Decimal(v) if isinstance(v, float) else v for k, v in row.items()} for row in body]


def stage(tmp_path: Path, content: str, fill: FillTarget | None = None) -> StagedFile:
    path = write_file(content)
    try:
        return stage_file(
            tmp_path / "stage.db",
            None,
            path,
            encoding="utf-8",
            limits=DEFAULT_FILE_LIMITS,
            fill=fill,
        )
    finally:
        path.unlink()


def has_table(runtime: Runtime, table: str) -> bool:
    with runtime.engine.connect() as conn:
        return sa.inspect(conn).has_table(table)


def staged_tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}


# the first batch (BATCH_ROWS rows) says integers, a later one brings a decimal
LATE_DECIMAL = "id,n\n" + "".join(f"{i},{i}\n" for i in range(BATCH_ROWS)) + "0,0.5\n"
# the first batch's timestamps are plain, a later one has a fraction (Python converts it)
LATE_FRACTION = (
    "id,at\n"
    + "".join(f"{i},2024-01-05 10:30:00\n" for i in range(BATCH_ROWS))
    + "0,2024-01-05 10:30:00.5\n"
)

# the first batch's decimals all have two fractional digits, a later one has one
LATE_SHORT = "id,n\n" + "".join(f"{i},1.25\n" for i in range(BATCH_ROWS)) + "0,-1.5\n"
# a later empty value, where the first batch has none: converted the same way
LATE_EMPTY = "id,n\n" + "".join(f"{i},{i}\n" for i in range(BATCH_ROWS)) + "0,\n"
# a column with no value in the first batch: any type may follow, nothing is guessed
NO_GUESS = "id,late\n" + "".join(f"{i},\n" for i in range(BATCH_ROWS)) + "0,1.5\n"


@SQLITE
def test_a_large_first_file_is_written_into_its_table_while_checked(
    runtime: Runtime, tmp_path: Path, parallel: None
) -> None:
    result = stage(tmp_path, PLAIN, FillTarget(runtime.engine, "filled"))
    assert result.in_table
    assert result.converted_by is None
    assert staged_tables(tmp_path / "stage.db") == set()  # nothing staged
    assert has_table(runtime, "filled")
    types = {c.name: (c.type, c.scale) for c in result.columns}
    assert types["amount"] == (ColumnType.DECIMAL, 2)
    assert types["rate"] == (ColumnType.DECIMAL, 3)
    assert types["at"] == (ColumnType.TIMESTAMP, 0)


@SQLITE
@pytest.mark.parametrize(
    ("content", "checked"),
    [
        pytest.param(LATE_DECIMAL, (ColumnType.DECIMAL, 1), id="decimal"),
        pytest.param(LATE_FRACTION, (ColumnType.TIMESTAMP, 0), id="fraction"),
        pytest.param(LATE_SHORT, (ColumnType.DECIMAL, 2), id="short-decimal"),
    ],
)
def test_a_head_the_checks_contradict_is_written_again_as_checked(
    runtime: Runtime,
    tmp_path: Path,
    parallel: None,
    content: str,
    checked: tuple[ColumnType, int],
) -> None:
    """The rows written as the head suggested are dropped, and written again, as
    checked (the values read back: `test_every_path_reads_back_the_same_exact_values`)."""
    result = stage(tmp_path, content, FillTarget(runtime.engine, "filled"))
    assert result.in_table
    assert staged_tables(tmp_path / "stage.db") == set()
    assert (result.columns[1].type, result.columns[1].scale) == checked
    with runtime.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM filled").scalar_one() == BATCH_ROWS + 1


@SQLITE
def test_without_a_guess_a_large_first_file_is_staged_as_text(
    runtime: Runtime, tmp_path: Path, parallel: None
) -> None:
    """A column with no value in the first batch (any type may follow): no guess, so
    the rows are staged as their text, converted as `fill_staged` copies them."""
    result = stage(tmp_path, NO_GUESS, FillTarget(runtime.engine, "filled"))
    assert not result.in_table
    assert result.converted_by is not None
    assert len(result.converted_by) == len(result.columns) == 2
    assert staged_tables(tmp_path / "stage.db") == {staging.RAW_TABLE}  # nothing converted
    assert not has_table(runtime, "filled")


@pytest.mark.parametrize(
    ("content", "raw"),
    [pytest.param(PLAIN, True, id="plain"), pytest.param(OFFSETS, False, id="offsets")],
)
def test_a_first_file_needing_python_is_converted_in_staging(
    tmp_path: Path, parallel: None, content: str, raw: bool
) -> None:
    """Without a fill target, a first file is staged as its text where SQL alone
    converts it; timestamps with offsets are converted in Python: that file's rows are
    converted into the staging database, as every later file's are."""
    result = stage(tmp_path, content)
    assert (result.converted_by is not None) == raw
    expected = staging.RAW_TABLE if raw else staging.STAGED_TABLE
    assert staged_tables(tmp_path / "stage.db") == {expected}


def test_every_path_reads_back_the_same_exact_values(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = load(runtime, tenant, PLAIN, "small")  # checked, then converted in staging
    monkeypatch.setattr(staged, "PARALLEL_CHECK_MIN_BYTES", 0)
    large = load(runtime, tenant, PLAIN, "large")  # staged as text beside the checks
    offsets = load(runtime, tenant, OFFSETS, "offsets")
    assert rows_of(runtime, tenant, small) == EXPECTED
    assert rows_of(runtime, tenant, large) == EXPECTED
    assert [row["at"] for row in rows_of(runtime, tenant, offsets)] == [
        "2024-01-05T08:30:00Z",
        "2024-01-05T10:30:00Z",
    ]
    ends = [  # the first row's value and the last's
        (LATE_DECIMAL, Decimal("0.0"), Decimal("0.5")),
        (LATE_FRACTION, "2024-01-05T10:30:00", "2024-01-05T10:30:00.5"),
        (LATE_SHORT, Decimal("1.25"), Decimal("-1.50")),
        (LATE_EMPTY, 0, None),
        (NO_GUESS, None, Decimal("1.5")),
    ]
    for content, first_value, last_value in ends:
        resource_id = load(runtime, tenant, content, f"late {len(content)} {last_value}")
        [first] = read_data(runtime, tenant, resource_id, ordering="_row", page_size=1)
        [last] = read_data(runtime, tenant, resource_id, ordering="-_row", page_size=1)
        assert (list(first.values()), list(last.values())) == ([0, first_value], [0, last_value])
    # a later file of the source: checked against its columns, converted in staging
    path = write_file("id,amount,rate,flag,day,at,note,count\n5,1.5,0.0001,,,,,\n")
    try:
        runtime.catalogue.append_file(large, path)
    finally:
        path.unlink()
    last = rows_of(runtime, tenant, large)[-1]
    assert (last["amount"], last["rate"]) == (Decimal("1.50"), Decimal("0.0001"))


@pytest.mark.parametrize(
    ("bad", "line", "reason"),
    [
        pytest.param(  # written into its table while checked
            PLAIN + "5,1.00,1,true,2024-01-01,2024-01-01 00:00:00,e\n",
            6,
            "expected 8 fields, found 7",
            id="guessed",
        ),
        pytest.param(  # staged as its text
            NO_GUESS + '1,"2\n', BATCH_ROWS + 3, "unexpected end of data", id="not-guessed"
        ),
    ],
)
def test_a_bad_large_first_file_fails_on_its_line_and_leaves_nothing(
    runtime: Runtime, tenant: Tenant, parallel: None, bad: str, line: int, reason: str
) -> None:
    with pytest.raises(LoadError) as failed:
        load(runtime, tenant, bad, "bad")
    assert failed.value.line == line
    assert reason in str(failed.value)
    assert count_resources(runtime, tenant) == 0
    staging_dir = runtime.settings.blob_dir / "staging"
    assert not staging_dir.is_dir() or list(staging_dir.iterdir()) == []
    with runtime.engine.connect() as conn:
        tables = sa.inspect(conn).get_table_names()
    assert [t for t in tables if t.startswith("staged_")] == []


@SQLITE
def test_a_large_first_files_rows_keep_the_files_order_and_ids_across_files(
    runtime: Runtime, tenant: Tenant, parallel: None
) -> None:
    """A large first file's rows go into their table many to an INSERT, each with its row
    id given (`SqliteAppender`'s `first_id`), several transactions to a batch: row ids
    1 up in the file's order across statements, transactions and batches, a last
    statement of fewer rows, and a later file's rows numbered after them."""
    count = 2 * BATCH_ROWS + ROWS_PER_STATEMENT + 7  # not a whole number of statements
    assert BATCH_ROWS > FILL_TRANSACTION_ROWS
    lines = "".join(f"{n},{n % 7}.{n % 100:02d},{'' if n % 5 else f'm{n}'}\n" for n in range(count))
    resource_id = load(runtime, tenant, "id,amount,memo\n" + lines, "ordered")
    path = write_file("id,amount,memo\n-1,0.5,later\n-2,,\n")
    try:
        runtime.catalogue.append_file(resource_id, path)
    finally:
        path.unlink()
    with runtime.engine.connect() as conn:
        resource = find_resource(conn, resource_id)
        assert resource is not None
        table = resource.table_name
        rows = conn.exec_driver_sql(
            f"SELECT _row_id, c0, c1, c2 FROM {table} ORDER BY _row_id"
        ).all()
        (sequence,) = conn.exec_driver_sql(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)
        ).one()
    expected = [
        (n + 1, n, int(f"{n % 7}{n % 100:02d}"), None if n % 5 else f"m{n}") for n in range(count)
    ]
    assert [tuple(row) for row in rows] == [
        *expected,
        (count + 1, -1, 50, "later"),
        (count + 2, -2, None, None),
    ]
    assert sequence == count + 2


@SQLITE
def test_an_insert_of_many_rows_keeps_within_sqlites_limit_on_parameters(
    runtime: Runtime,
) -> None:
    """Fewer rows to a statement where they would pass SQLite's limit on a parameter's
    number (lowered here to 7: two rows of 3 values and the id)."""
    columns = (
        Column("id", "c0", ColumnType.INTEGER),
        Column("amount", "c1", ColumnType.DECIMAL, 2),
        Column("memo", "c2", ColumnType.TEXT),
    )
    shapes = {c.physical: ValueShape() for c in columns}
    rows = [[str(n), f"{n}.5", f"m{n}"] for n in range(5)]
    with write_connection(runtime.engine) as conn:
        driver = conn.connection.dbapi_connection
        assert isinstance(driver, sqlite3.Connection)
        limit = driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 7)
        try:
            with conn.begin():
                create_table(conn, "many", columns, file_ids=True)
            appender = SqliteAppender(conn, "many", columns, shapes, 77, first_id=1)
            try:
                with conn.begin():
                    appender.append(rows[:3])
                    appender.append(rows[3:])
            finally:
                appender.close()
        finally:
            driver.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
        stored = conn.exec_driver_sql("SELECT * FROM many ORDER BY _row_id").all()
    assert [tuple(row) for row in stored] == [
        (n + 1, n, n * 100 + 50, f"m{n}", 77, None) for n in range(5)
    ]
