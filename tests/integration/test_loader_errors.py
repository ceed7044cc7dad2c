"""Bad files on both backends: a LoadError naming the line and column, and nothing
written. A new source is not created at all; a later file adds no row, changes no
column and leaves the data version where it was.
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest
import sqlalchemy as sa

from support.factories import Tenant, count_resources, read_data, write_file
from tally.core.errors import LoadError, SchemaMismatchError
from tally.runtime import Runtime
from tally.services.loader.reader import BATCH_ROWS
from tally.storage import resources
from tally.storage.resources import Resource


def row_tables(runtime: Runtime) -> set[str]:
    """The per-resource row tables (r_<id>) in the database."""
    names = sa.inspect(runtime.engine).get_table_names()
    return {n for n in names if n.startswith("r_") and n[2:].isdigit()}


def create_fails(runtime: Runtime, tenant: Tenant, content: str | bytes) -> LoadError:
    """Create a source from a bad file: the error, once it is known nothing was made."""
    tables = row_tables(runtime)
    path = write_file(content)
    try:
        with pytest.raises(LoadError) as caught:
            runtime.catalogue.create_source_from_file(
                workspace_id=tenant.workspace_id, name="bad", path=path
            )
    finally:
        path.unlink()
    assert count_resources(runtime, tenant) == 0
    assert row_tables(runtime) == tables
    return caught.value


def load(runtime: Runtime, tenant: Tenant, content: str) -> Resource:
    path = write_file(content)
    try:
        return runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name="good", path=path
        ).resource
    finally:
        path.unlink()


def rows_of(runtime: Runtime, tenant: Tenant, resource_id: int) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, resource_id, page_size=10_000)


def append_fails(
    runtime: Runtime,
    tenant: Tenant,
    resource: Resource,
    content: str | bytes,
    error: type[LoadError] = LoadError,
) -> LoadError:
    """Append a bad file: the error, once it is known the resource did not change."""
    before_rows = rows_of(runtime, tenant, resource.id)
    with runtime.engine.connect() as conn:
        before = resources.get_resource(conn, resource.id)
    path = write_file(content)
    try:
        with pytest.raises(error) as caught:
            runtime.catalogue.append_file(resource.id, path)
    finally:
        path.unlink()
    with runtime.engine.connect() as conn:
        after = resources.get_resource(conn, resource.id)
    assert after.data_version == before.data_version
    assert after.row_count == before.row_count
    assert after.columns == before.columns
    assert rows_of(runtime, tenant, resource.id) == before_rows
    return caught.value


# --- a new source from a bad file ------------------------------------------------------

MULTILINE = 'id,memo,amount\n1,"a\nb\nc",1.5\n'

BAD_FILES: dict[str, tuple[str | bytes, int | None, str | None, str]] = {
    # name: (content, line, column, part of the message)
    "ragged after a multiline field": (MULTILINE + "2,x\n", 5, None, "expected 3 fields, found 2"),
    "too many fields": ("a,b\n1,2\n\n3,4,5\n", 4, None, "expected 2 fields, found 3"),
    "ragged crlf": ("a;b\r\n1;2\r\n3\r\n", 3, None, "expected 2 fields, found 1"),
    "ragged only record": ("a|b\n1\n", 2, None, "expected 2 fields, found 1"),
    "empty header name": ("a,,c\n1,2,3\n", 1, None, "column 2 has no name"),
    "empty last header name": ("a,b,\n1,2,3\n", 1, None, "column 3 has no name"),
    "duplicate header name": ("a,b,a\n1,2,3\n", 1, "a", "appears twice"),
    "duplicate dotted name": (
        "bank.amount;x;bank.amount\n1;2;3\n",
        1,
        "bank.amount",
        "appears twice",
    ),
    "empty file": ("", 1, None, "the file is empty"),
    "blank lines only": ("\n\r\n\n", 1, None, "the file is empty"),
    "bom only": (b"\xef\xbb\xbf", 1, None, "the file is empty"),
    "empty gzip": (gzip.compress(b""), 1, None, "the file is empty"),
    "unterminated quote": ('a,b\n1,2\n3,"oops\n4,5\n', 3, None, "malformed CSV"),
    "unterminated quote after blank lines": (
        'a,b\n1,2\n\n\n3,"oops\n4,5\n',
        5,
        None,
        "malformed CSV",
    ),
    "unterminated quote in header": ('"a,b\n1,2\n', 1, None, "malformed CSV"),
    "text after closing quote": ('a,b\n1,2\n3,"x"y\n', 3, None, "malformed CSV"),
    "nul character": ("a,b\n1,x\x00y\n", 2, "b", "NUL"),
    "utf-16": ("a,b\n1,2\n".encode("utf-16"), 1, None, "UTF-16"),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_bad_file_creates_nothing(runtime: Runtime, tenant: Tenant, name: str) -> None:
    content, line, column, message = BAD_FILES[name]
    error = create_fails(runtime, tenant, content)
    assert (error.line, error.column) == (line, column)
    assert message in error.reason
    assert str(error).startswith(f"line {line}")


def test_ragged_row_in_a_later_batch(runtime: Runtime, tenant: Tenant) -> None:
    content = "id,memo\n" + "".join(f'{i},"m\n{i}"\n' for i in range(BATCH_ROWS + 3)) + "x\n"
    error = create_fails(runtime, tenant, content)
    assert error.line == 2 * (BATCH_ROWS + 3) + 2
    assert error.reason == "expected 2 fields, found 1"


def test_truncated_gzip_creates_nothing(runtime: Runtime, tenant: Tenant) -> None:
    content = gzip.compress(b"a,b\n" + b"1,2\n" * 1000)[:-12]
    error = create_fails(runtime, tenant, content)
    assert "cannot be read" in error.reason


def test_the_failed_name_stays_free(runtime: Runtime, tenant: Tenant) -> None:
    create_fails(runtime, tenant, "a,a\n1,2\n")
    path = write_file("a,b\n1,2\n")
    try:
        result = runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name="bad", path=path
        )
    finally:
        path.unlink()
    assert result.resource.name == "bad"
    assert f"r_{result.resource.id}" in row_tables(runtime)
    assert rows_of(runtime, tenant, result.resource.id) == [{"a": 1, "b": 2}]


# --- a later file that does not fit -------------------------------------------------------

FIRST = "id,amount,when,at,paid,note\n1,1.5,2024-01-05,2024-01-05T10:00:00,true,x\n"


def test_later_file_with_missing_and_unexpected_columns(runtime: Runtime, tenant: Tenant) -> None:
    source = load(runtime, tenant, FIRST)
    error = append_fails(
        runtime,
        tenant,
        source,
        "note,Amount,id,when,extra,paid\n1,2,3,2024-01-01,5,true\n",
        SchemaMismatchError,
    )
    assert isinstance(error, SchemaMismatchError)
    assert error.difference.missing == ["amount", "at"]
    assert error.difference.unexpected == ["Amount", "extra"]
    assert error.line == 1
    assert "missing columns: amount, at" in str(error)
    assert "unexpected columns: Amount, extra" in str(error)


def test_later_file_with_a_missing_column_only(runtime: Runtime, tenant: Tenant) -> None:
    source = load(runtime, tenant, FIRST)
    error = append_fails(
        runtime, tenant, source, "id,amount,when,at,paid\n2,1,,,\n", SchemaMismatchError
    )
    assert isinstance(error, SchemaMismatchError)
    assert (error.difference.missing, error.difference.unexpected) == (["note"], [])


WRONG_VALUES = {
    # name: (later file, line, column)
    "text in an integer column": ("id,amount,when,at,paid,note\n2,1,,,,\nabc,2,,,,\n", 3, "id"),
    "text in an integer column after a multiline field": (
        'note,id,amount,when,at,paid\n"a\nb",2,1,,,\nc,2.5x,1,,,\n',
        4,
        "id",
    ),
    "text in a decimal column": ("id,amount,when,at,paid,note\n2,1.5e3,,,,\n", 2, "amount"),
    "leading zero in a decimal column": ("id,amount,when,at,paid,note\n2,01.5,,,,\n", 2, "amount"),
    "impossible date": ("id,amount,when,at,paid,note\n2,1,2024-02-30,,,\n", 2, "when"),
    "timestamp in a date column": (
        "id,amount,when,at,paid,note\n2,1,2024-02-03T10:00:00,,,\n",
        2,
        "when",
    ),
    "offset in a naive timestamp column": (
        "id,amount,when,at,paid,note\n2,1,,2024-02-03T10:00:00+01:00,,\n",
        2,
        "at",
    ),
    "word in a boolean column": ("id,amount,when,at,paid,note\n2,1,,,yes,\n", 2, "paid"),
    "integer beyond int64": ("id,amount,when,at,paid,note\n9223372036854775808,1,,,,\n", 2, "id"),
    "decimal beyond int64": (
        "id,amount,when,at,paid,note\n1,92233720368547758.08,,,,\n",
        2,
        "amount",
    ),
}


@pytest.mark.parametrize("name", WRONG_VALUES)
def test_later_file_with_a_value_of_another_type(
    runtime: Runtime, tenant: Tenant, name: str
) -> None:
    source = load(runtime, tenant, FIRST)
    content, line, column = WRONG_VALUES[name]
    error = append_fails(runtime, tenant, source, content)
    assert (error.line, error.column) == (line, column)
    assert str(error).startswith(f"line {line}, column '{column}': ")


def test_later_file_with_a_bad_value_in_a_later_batch(runtime: Runtime, tenant: Tenant) -> None:
    source = load(runtime, tenant, FIRST)
    rows = [f"{i},0.5,,,false,n" for i in range(BATCH_ROWS + 10)]
    rows[BATCH_ROWS + 4] = "7,0.5,,,false,n,"  # ragged
    error = append_fails(
        runtime, tenant, source, "id,amount,when,at,paid,note\n" + "\n".join(rows) + "\n"
    )
    assert (error.line, error.column) == (BATCH_ROWS + 6, None)
    rows[BATCH_ROWS + 4] = "7,0.5,2024-13-01,,false,n"
    error = append_fails(
        runtime, tenant, source, "id,amount,when,at,paid,note\n" + "\n".join(rows) + "\n"
    )
    assert (error.line, error.column) == (BATCH_ROWS + 6, "when")


def test_later_file_with_bad_header_or_rows(runtime: Runtime, tenant: Tenant) -> None:
    source = load(runtime, tenant, FIRST)
    error = append_fails(runtime, tenant, source, "id,amount,when,at,paid,id\n")
    assert (error.line, error.column) == (1, "id")
    error = append_fails(runtime, tenant, source, "")
    assert error.line == 1
    error = append_fails(
        runtime, tenant, source, 'id,amount,when,at,paid,note\n2,1,,,,"open\n3,1,,,,x\n'
    )
    assert (error.line, error.column) == (2, None)


def test_late_digits_push_an_early_value_beyond_int64(runtime: Runtime, tenant: Tenant) -> None:
    # 99999999999 fits at scale 2; at scale 10, brought by the last row, it does not
    source = load(runtime, tenant, "n\n1.25\n")
    values = ["1"] * 3 + ["99999999999"] + ["2"] * BATCH_ROWS + ["0.0000000001"]
    error = append_fails(runtime, tenant, source, "n\n" + "\n".join(values) + "\n")
    assert (error.line, error.column) == (5, "n")
    assert "99999999999" in error.reason


def test_late_digits_push_stored_values_beyond_int64(runtime: Runtime, tenant: Tenant) -> None:
    source = load(runtime, tenant, "n\n92233720368547758.07\n-1.5\n")
    error = append_fails(runtime, tenant, source, "n\n1\n0.125\n2\n")
    assert (error.line, error.column) == (3, "n")
    assert "stored values" in error.reason


def test_offset_moving_a_timestamp_out_of_the_calendar(runtime: Runtime, tenant: Tenant) -> None:
    source = load(runtime, tenant, "at\n2024-01-05T10:00:00Z\n")
    error = append_fails(runtime, tenant, source, "at\n9999-12-31T23:00:00-02:00\n")
    assert (error.line, error.column) == (2, "at")
