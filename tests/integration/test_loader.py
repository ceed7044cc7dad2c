"""The CSV loader on both backends: types inferred from the whole file, dialects,
encodings, later files, and flat memory. Every result is read back through the Data
API's read path (runtime.data_query), so what is asserted is what a client sees.

On PostgreSQL the rows normally travel by COPY to a staging table; a file with blank
lines between records makes COPY disagree with the checks, so the "blank lines" layout
drives the fallback path (rows converted in Python) with the same expectations.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from support.databases import make_settings, primary_key
from support.factories import Tenant, read_body, read_data, write_file
from support.waiting import eventually
from tally.core.columns import Column, ColumnType
from tally.runtime import Runtime
from tally.services import catalogue
from tally.services.loader.load import (
    GUESS_BATCHES,
    LoadResult,
    expected_columns,
    first_pass,
    load_into,
    row_batches,
)
from tally.services.loader.reader import (
    BATCH_ROWS,
    detect_format,
    read_csv,
    read_head,
    utf8_chunks,
)
from tally.services.sources import SourceDefinition
from tally.storage import resources
from tally.storage.bulk_load.interface import RawFile
from tally.storage.bulk_load.postgresql import (
    PostgresBulkLoad,
    copy_into,
    create_staging,
    read_staging,
)
from tally.storage.engine import create_database_engine, write_connection
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource
from tally.worker.runner import Worker

PAGE = 10_000


def load(
    runtime: Runtime,
    tenant: Tenant,
    content: str | bytes,
    name: str = "src",
    encoding: str = "utf-8",
) -> LoadResult:
    path = write_file(content)
    try:
        return runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name=name, path=path, encoding=encoding
        )
    finally:
        path.unlink()


def append(runtime: Runtime, resource_id: int, content: str | bytes) -> LoadResult:
    path = write_file(content)
    try:
        return runtime.catalogue.append_file(resource_id, path)
    finally:
        path.unlink()


def read_pages(runtime: Runtime, tenant: Tenant, resource_id: int) -> Iterator[bytes]:
    page = 1
    while True:
        body = read_body(runtime, tenant, resource_id, page=page, page_size=PAGE)
        yield body
        if json.loads(body)["meta"]["total_pages"] <= page:
            return
        page += 1


def rows_of(runtime: Runtime, tenant: Tenant, resource_id: int) -> list[dict[str, Any]]:
    """Every row, in insertion order; JSON numbers with a '.' as exact Decimals."""
    rows: list[dict[str, Any]] = []
    for body in read_pages(runtime, tenant, resource_id):
        rows += json.loads(body, parse_float=Decimal)["data"]
    return rows


def ordered_by(
    runtime: Runtime, tenant: Tenant, resource_id: int, ordering: str
) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, resource_id, ordering=ordering, page_size=PAGE)


def column_of(rows: list[dict[str, Any]], name: str) -> list[Any]:
    return [row[name] for row in rows]


def texts(values: list[Any]) -> list[str | None]:
    """Decimals as their exact digits (Decimal('1.50') keeps its trailing zero)."""
    return [
        None if v is None else format(v, "f") if isinstance(v, Decimal) else str(v) for v in values
    ]


def types_of(resource: Resource) -> dict[str, tuple[ColumnType, int, bool]]:
    return {c.name: (c.type, c.scale, c.timezone) for c in resource.columns}


# --- inference, one column per case ----------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    values: list[str]
    type: ColumnType
    expected: list[Any]  # as read back: int, bool, str, None, or str(Decimal) for decimals
    scale: int = 0
    timezone: bool = False


T, INT, D = ColumnType.TEXT, ColumnType.INTEGER, ColumnType.DECIMAL
B, DT, TS = ColumnType.BOOLEAN, ColumnType.DATE, ColumnType.TIMESTAMP

CASES = [
    Case(
        "integer",
        ["1", "-2", "+3", "0", "9223372036854775807"],
        INT,
        [1, -2, 3, 0, 9223372036854775807],
    ),
    Case("beyond int64", ["1", "9223372036854775808"], T, ["1", "9223372036854775808"]),
    Case("leading zeros", ["007", "42"], T, ["007", "42"]),
    Case("zero point leading zero", ["00.5", "1.5"], T, ["00.5", "1.5"]),
    Case(
        "decimal scales",
        ["1.5", "2.25", "3", "", "-4"],
        D,
        ["1.50", "2.25", "3.00", None, "-4.00"],
        scale=2,
    ),
    Case(
        "decimal exact",
        ["12345678901234567.89", "-0.05", "0.5", "-12345678901234567.89"],
        D,
        ["12345678901234567.89", "-0.05", "0.50", "-12345678901234567.89"],
        scale=2,
    ),
    Case(
        "negative below one",
        ["-0.05", "-0.5", "-0.001"],
        D,
        ["-0.050", "-0.500", "-0.001"],
        scale=3,
    ),
    Case(
        "decimal at int64 edge",
        ["92233720368547758.07", "1.1"],
        D,
        ["92233720368547758.07", "1.10"],
        scale=2,
    ),
    Case(
        "decimal beyond int64", ["92233720368547758.08", "1.1"], T, ["92233720368547758.08", "1.1"]
    ),
    # short values can leave int64 once another value brings many fractional digits
    Case(
        "short value scaled beyond int64",
        ["99999999999", "0.0000000001"],
        T,
        ["99999999999", "0.0000000001"],
    ),
    Case(
        "short value scaled within int64",
        ["922337203", "0.0000000001"],
        D,
        ["922337203.0000000000", "0.0000000001"],
        scale=10,
    ),
    Case(
        "crypto amounts",
        ["1.000000000000000001", "9.2", "", "-9.223372036854775807"],
        D,
        ["1.000000000000000001", "9.200000000000000000", None, "-9.223372036854775807"],
        scale=18,
    ),
    Case(
        "nineteen fraction digits",
        ["0.0000000000000000001", "0.5", "-0.25"],
        D,
        ["0.0000000000000000001", "0.5000000000000000000", "-0.2500000000000000000"],
        scale=19,
    ),
    Case(
        "crypto amount at int64 edge",
        ["0.000000000000000001", "9.223372036854775808"],
        T,
        ["0.000000000000000001", "9.223372036854775808"],
    ),
    Case(
        "crypto amounts too large",
        ["1.000000000000000001", "10"],
        T,
        ["1.000000000000000001", "10"],
    ),
    Case("exponent", ["1e5", "2"], T, ["1e5", "2"]),
    Case("padded number", [" 42", "43"], T, [" 42", "43"]),
    Case("booleans", ["true", "FALSE", "True", "fAlSe", ""], B, [True, False, True, False, None]),
    Case("yes is text", ["true", "yes"], T, ["true", "yes"]),
    Case("ones and zeros", ["1", "0"], INT, [1, 0]),
    Case("all empty", ["", "", ""], T, [None, None, None]),
    Case("dates", ["2024-01-05", "2024-02-29", ""], DT, ["2024-01-05", "2024-02-29", None]),
    Case("impossible date", ["2024-01-05", "2024-02-30"], T, ["2024-01-05", "2024-02-30"]),
    Case(
        "date then timestamp",
        ["2024-01-05", "2024-01-05T10:30:00"],
        TS,
        ["2024-01-05T00:00:00", "2024-01-05T10:30:00"],
    ),
    Case(
        "naive with space",
        ["2024-01-05 10:30:00", "2024-12-31 23:59:59"],
        TS,
        ["2024-01-05T10:30:00", "2024-12-31T23:59:59"],
    ),
    Case(
        "naive minutes",
        ["2024-01-05 10:30", "2024-01-05T07:05"],
        TS,
        ["2024-01-05T10:30:00", "2024-01-05T07:05:00"],
    ),
    Case(
        "naive fractions",
        [
            "2024-01-05T10:30:00.120000",
            "2024-01-05 10:30:00.000000",
            "2024-01-05T10:30:00.5",
            "2024-01-05T10:30:00.000001",
        ],
        TS,
        [
            "2024-01-05T10:30:00.12",
            "2024-01-05T10:30:00",
            "2024-01-05T10:30:00.5",
            "2024-01-05T10:30:00.000001",
        ],
    ),
    Case(
        "offsets",
        [
            "2024-01-05T10:30:00+02:00",
            "2024-01-05T23:30:00-0130",
            "2024-01-05T10:30:00Z",
            "2024-12-31T23:30:00-01:00",
            "2024-01-05 10:30:00.250+01:00",
            "2024-03-01T00:15:00+00:30",
            "",
        ],
        TS,
        [
            "2024-01-05T08:30:00Z",
            "2024-01-06T01:00:00Z",
            "2024-01-05T10:30:00Z",
            "2025-01-01T00:30:00Z",
            "2024-01-05T09:30:00.25Z",
            "2024-02-29T23:45:00Z",
            None,
        ],
        timezone=True,
    ),
    Case(
        "plain utc",
        ["2024-01-05T10:30:00Z", "2024-01-05 11:00:00Z"],
        TS,
        ["2024-01-05T10:30:00Z", "2024-01-05T11:00:00Z"],
        timezone=True,
    ),
    Case(
        "lowercase z",
        ["2024-01-05T10:30:00z", "2024-01-05T10:30:00+01:00"],
        TS,
        ["2024-01-05T10:30:00Z", "2024-01-05T09:30:00Z"],
        timezone=True,
    ),
    Case(
        "offset beyond the calendar",
        ["9999-12-31T23:00:00-02:00", "2024-01-05T10:30:00Z"],
        T,
        ["9999-12-31T23:00:00-02:00", "2024-01-05T10:30:00Z"],
    ),
    Case(
        "offset before the calendar",
        ["0001-01-01T00:30:00+01:00"],
        T,
        ["0001-01-01T00:30:00+01:00"],
    ),
    Case(
        "offset within the calendar",
        ["0001-01-01T00:30:00-01:00", "9999-12-31T23:00:00+02:00"],
        TS,
        ["0001-01-01T01:30:00Z", "9999-12-31T21:00:00Z"],
        timezone=True,
    ),
    Case(
        "naive and aware",
        ["2024-01-05T10:30:00", "2024-01-05T10:30:00Z"],
        T,
        ["2024-01-05T10:30:00", "2024-01-05T10:30:00Z"],
    ),
    Case(
        "date and aware",
        ["2024-01-05", "2024-01-05T10:30:00Z"],
        T,
        ["2024-01-05", "2024-01-05T10:30:00Z"],
    ),
    Case("bank.amount", ["10.00", "-0.01"], D, ["10.00", "-0.01"], scale=2),
    Case("Amount EUR", ["x", "y"], T, ["x", "y"]),
    Case("MixedCase", ["a", "B"], T, ["a", "B"]),
    Case("mixedcase", ["c", "d"], T, ["c", "d"]),
]


def _csv_field(value: str, delimiter: str) -> str:
    if any(ch in value for ch in (delimiter, '"', "\n", "\r")):
        return '"' + value.replace('"', '""') + '"'
    return value


def cases_csv(delimiter: str = ",", newline: str = "\n", blank_lines: bool = False) -> str:
    height = max(len(c.values) for c in CASES)
    lines = [delimiter.join(_csv_field(c.name, delimiter) for c in CASES)]
    for i in range(height):
        values = [c.values[i] if i < len(c.values) else "" for c in CASES]
        lines.append(delimiter.join(_csv_field(v, delimiter) for v in values))
        if blank_lines:
            lines.append("")
    return newline.join(lines) + newline


LAYOUTS: dict[str, Any] = {
    "comma": lambda: cases_csv(),
    "blank lines": lambda: cases_csv(blank_lines=True),
    "semicolon crlf": lambda: cases_csv(";", "\r\n"),
    "cr line endings": lambda: cases_csv(",", "\r"),
    "tab": lambda: cases_csv("\t"),
    "pipe": lambda: cases_csv("|"),
    "bom": lambda: b"\xef\xbb\xbf" + cases_csv().encode(),
    "gzip": lambda: gzip.compress(cases_csv(";").encode()),
    "gzip bom blank lines": lambda: gzip.compress(
        b"\xef\xbb\xbf" + cases_csv("\t", "\r\n", blank_lines=True).encode()
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_type_is_inferred_and_read_back_exactly(
    runtime: Runtime, tenant: Tenant, layout: str
) -> None:
    result = load(runtime, tenant, LAYOUTS[layout]())
    height = max(len(c.values) for c in CASES)
    assert result.rows == height
    assert [c.name for c in result.resource.columns] == [c.name for c in CASES]
    rows = rows_of(runtime, tenant, result.resource.id)
    assert len(rows) == height
    assert list(rows[0]) == [c.name for c in CASES]  # labels kept exactly, in file order
    found = types_of(result.resource)
    for case in CASES:
        assert found[case.name] == (case.type, case.scale, case.timezone), case.name
        expected = case.expected + [None] * (height - len(case.expected))
        values = column_of(rows, case.name)
        if case.type is ColumnType.DECIMAL:
            assert all(v is None or isinstance(v, Decimal) for v in values), case.name
            values = texts(values)
        assert values == expected, case.name


def test_numbers_travel_as_exact_json_digits(runtime: Runtime, tenant: Tenant) -> None:
    csv = "amount,count\n12345678901234567.89,9223372036854775807\n-0.05,-1\n1.5,0\n"
    result = load(runtime, tenant, csv)
    body = b"".join(read_pages(runtime, tenant, result.resource.id))
    assert b"12345678901234567.89" in body
    assert b"9223372036854775807" in body
    assert b"-0.05" in body
    assert b"1.50" in body


def test_header_only_file_makes_text_columns_and_no_rows(runtime: Runtime, tenant: Tenant) -> None:
    result = load(runtime, tenant, "id;bank.amount;When\r\n")
    assert result.rows == 0
    assert types_of(result.resource) == {
        "id": (T, 0, False),
        "bank.amount": (T, 0, False),
        "When": (T, 0, False),
    }
    assert result.resource.row_count == 0
    assert result.resource.data_version == 1
    assert rows_of(runtime, tenant, result.resource.id) == []
    # the source takes a later file of the same columns; its values must be text-typed
    later = append(runtime, result.resource.id, "When,id,bank.amount\n2024-01-05,7,1.5\n")
    assert later.rows == 1
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"id": "7", "bank.amount": "1.5", "When": "2024-01-05"}
    ]


def test_single_column_file_with_blank_lines(runtime: Runtime, tenant: Tenant) -> None:
    # COPY reads a blank line of a one-column file as a NULL row: the counts disagree
    result = load(runtime, tenant, "amount\n1.5\n\n12.25\n\n\n-0.05\n")
    assert result.rows == 3
    rows = rows_of(runtime, tenant, result.resource.id)
    assert texts(column_of(rows, "amount")) == ["1.50", "12.25", "-0.05"]
    assert types_of(result.resource) == {"amount": (D, 2, False)}
    # stored as numbers: ordered by value, not by text
    ordered = ordered_by(runtime, tenant, result.resource.id, "-amount")
    assert texts(column_of(ordered, "amount")) == ["12.25", "1.50", "-0.05"]


def test_blank_line_before_the_header_is_skipped(runtime: Runtime, tenant: Tenant) -> None:
    result = load(runtime, tenant, "\n\nid,name\n1,a\n2,b\n")
    assert [c.name for c in result.resource.columns] == ["id", "name"]
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
    ]


def test_copy_end_marker_is_data(runtime: Runtime, tenant: Tenant) -> None:
    # a lone "\." ends PostgreSQL's COPY input; here it is a value like any other
    # (and a blank line makes COPY's row count agree with the checks' by chance)
    result = load(runtime, tenant, "code\n\nA\n\\.\n")
    assert result.rows == 2
    assert column_of(rows_of(runtime, tenant, result.resource.id), "code") == ["A", "\\."]


@pytest.mark.parametrize("blank_lines", [False, True])
def test_quote_inside_an_unquoted_field_is_text(
    runtime: Runtime, tenant: Tenant, blank_lines: bool
) -> None:
    # PostgreSQL's COPY would open a quoted section at the first quote: 'the best one'
    sep = "\n\n" if blank_lines else "\n"
    content = sep.join(["id,memo", '1,the "best" one', '2,"quoted ""twice"""', '3,5" pipe']) + sep
    result = load(runtime, tenant, content)
    assert column_of(rows_of(runtime, tenant, result.resource.id), "memo") == [
        'the "best" one',
        'quoted "twice"',
        '5" pipe',
    ]


def test_quoted_copy_end_marker_in_a_multiline_value(runtime: Runtime, tenant: Tenant) -> None:
    result = load(runtime, tenant, 'id,memo\n1,"x\n\\.\ny"\n2,z\n')
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"id": 1, "memo": "x\n\\.\ny"},
        {"id": 2, "memo": "z"},
    ]


def checks_read(path: Path) -> tuple[int, int, list[int]]:
    """(rows, blank lines, quote characters per column) as the loader's checks read them."""
    file_format = detect_format(path)
    with read_csv(path, file_format) as (header, records):
        quotes = [0] * len(header)
        rows = 0
        for batch in records:
            rows += len(batch.rows)
            for row in batch.rows:
                for i, value in enumerate(row):
                    quotes[i] += value.count('"')
        return rows, records.blank_lines, quotes


def test_copy_reads_some_files_otherwise(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Why PostgreSQL's fast path compares what COPY read with what the checks read, and
    falls back to sending the checked rows (the tests above load these files)."""
    engine = create_database_engine(
        make_settings(request, "postgresql", tmp_path / "home").effective_database_url()
    )

    def copy_reads(content: str) -> tuple[int, list[int]]:
        path = write_file(content)
        try:
            file_format = detect_format(path)
            with read_csv(path, file_format) as (header, _records):
                width = len(header)
            with engine.connect() as conn, conn.begin():
                create_staging(conn, "staging_test", width)
                raw = RawFile(lambda: utf8_chunks(path, file_format), width, file_format.delimiter)
                staged = [Column(f"s{i}", f"s{i}", ColumnType.TEXT) for i in range(width)]
                copy_into(conn, "staging_test", staged, raw, force_null=False)
                return read_staging(conn, "staging_test", width)
        finally:
            path.unlink()

    def checks(content: str) -> tuple[int, int, list[int]]:
        path = write_file(content)
        try:
            return checks_read(path)
        finally:
            path.unlink()

    try:
        clean = 'id,memo\r\n1,"a ""b""\r\nc"\r\n2,x\r\n'
        assert copy_reads(clean) == (2, [0, 2])
        assert checks(clean) == (2, 0, [0, 2])
        with pytest.raises(psycopg.errors.BadCopyFileFormat):
            copy_reads("a,b\n1,2\n\n3,4\n")  # a blank line
        assert checks("a,b\n1,2\n\n3,4\n") == (2, 1, [0, 0])
        midquote = 'id,memo\n1,the "best" one\n'
        assert copy_reads(midquote) == (1, [0, 0])  # 'the best one'
        assert checks(midquote) == (1, 0, [0, 2])
        end_marker = "code\n\nA\n\\.\nB\n"
        assert copy_reads(end_marker) == (2, [0])  # NULL, 'A': COPY stops at the marker
        assert checks(end_marker) == (3, 1, [0])
    finally:
        engine.dispose()


# --- inference across batches ------------------------------------------------------------


def many(values: list[str], header: str = "n") -> str:
    return header + "\n" + "\n".join(values) + "\n"


def test_integer_widens_to_decimal_in_a_later_batch(runtime: Runtime, tenant: Tenant) -> None:
    values = [str(i) for i in range(1, BATCH_ROWS + 1)] + ["2.25", "-7"]
    result = load(runtime, tenant, many(values))
    assert types_of(result.resource) == {"n": (D, 2, False)}
    got = texts(column_of(rows_of(runtime, tenant, result.resource.id), "n"))
    assert len(got) == BATCH_ROWS + 2
    assert got[:3] == ["1.00", "2.00", "3.00"]
    assert got[BATCH_ROWS - 1 :] == [f"{BATCH_ROWS}.00", "2.25", "-7.00"]


def test_integers_then_a_batch_of_decimals_keep_their_value(
    runtime: Runtime, tenant: Tenant
) -> None:
    # the second batch alone has uniform scale; the first batch's integers do not
    values = [str(i) for i in range(BATCH_ROWS)] + ["2.25", "3.50", "-0.75"]
    result = load(runtime, tenant, many(values))
    assert types_of(result.resource) == {"n": (D, 2, False)}
    got = texts(column_of(rows_of(runtime, tenant, result.resource.id), "n"))
    assert got[:2] == ["0.00", "1.00"]
    assert got[BATCH_ROWS - 1 :] == [f"{BATCH_ROWS - 1}.00", "2.25", "3.50", "-0.75"]


def test_empty_first_batch_then_decimals(runtime: Runtime, tenant: Tenant) -> None:
    values = [""] * BATCH_ROWS + ["1.5", "2.25"]
    result = load(runtime, tenant, "id,n\n" + "".join(f"{i},{v}\n" for i, v in enumerate(values)))
    assert types_of(result.resource)["n"] == (D, 2, False)
    got = texts(column_of(rows_of(runtime, tenant, result.resource.id), "n"))
    assert got[0] is None
    assert got[-2:] == ["1.50", "2.25"]


def test_date_widens_to_timestamp_in_a_later_batch(runtime: Runtime, tenant: Tenant) -> None:
    values = ["2024-01-05"] * BATCH_ROWS + ["2024-01-06 08:00:00", "2024-01-07"]
    result = load(runtime, tenant, many(values, "when"))
    assert types_of(result.resource) == {"when": (TS, 0, False)}
    got = column_of(rows_of(runtime, tenant, result.resource.id), "when")
    assert got[0] == "2024-01-05T00:00:00"
    assert got[-2:] == ["2024-01-06T08:00:00", "2024-01-07T00:00:00"]


def test_late_text_turns_numbers_into_text(runtime: Runtime, tenant: Tenant) -> None:
    values = [str(i) for i in range(BATCH_ROWS + 5)] + ["n/a", "1.50"]
    result = load(runtime, tenant, many(values))
    assert types_of(result.resource) == {"n": (T, 0, False)}
    got = column_of(rows_of(runtime, tenant, result.resource.id), "n")
    assert got == values  # kept exactly as written


def test_late_text_turns_decimals_into_text(runtime: Runtime, tenant: Tenant) -> None:
    values = ["1.5"] * BATCH_ROWS + ["-0.25", "1;5"]
    result = load(runtime, tenant, many(values))
    assert types_of(result.resource) == {"n": (T, 0, False)}
    assert column_of(rows_of(runtime, tenant, result.resource.id), "n")[-3:] == [
        "1.5",
        "-0.25",
        "1;5",
    ]


def test_late_offset_turns_naive_timestamps_into_text(runtime: Runtime, tenant: Tenant) -> None:
    values = ["2024-01-05T10:00:00"] * BATCH_ROWS + ["2024-01-05T10:00:00+01:00"]
    result = load(runtime, tenant, many(values, "at"))
    assert types_of(result.resource) == {"at": (T, 0, False)}
    assert column_of(rows_of(runtime, tenant, result.resource.id), "at")[-2:] == values[-2:]


def test_late_fraction_digits_overflow_earlier_short_values(
    runtime: Runtime, tenant: Tenant
) -> None:
    # 11 digits at scale 10 leave int64: noticed although both values are short
    values = ["99999999999"] + ["1"] * BATCH_ROWS + ["0.0000000001"]
    result = load(runtime, tenant, many(values))
    assert types_of(result.resource) == {"n": (T, 0, False)}
    got = column_of(rows_of(runtime, tenant, result.resource.id), "n")
    assert got[0] == "99999999999"
    assert got[-1] == "0.0000000001"


def test_late_fraction_digits_within_int64(runtime: Runtime, tenant: Tenant) -> None:
    values = ["922337203"] + ["1"] * BATCH_ROWS + ["0.0000000001"]
    result = load(runtime, tenant, many(values))
    assert types_of(result.resource) == {"n": (D, 10, False)}
    got = texts(column_of(rows_of(runtime, tenant, result.resource.id), "n"))
    assert got[0] == "922337203.0000000000"
    assert got[-1] == "0.0000000001"


def test_timestamp_plain_batch_then_fractions(runtime: Runtime, tenant: Tenant) -> None:
    values = ["2024-01-05 10:00:00Z"] * BATCH_ROWS + ["2024-01-05T10:00:00.100+01:00"]
    result = load(runtime, tenant, many(values, "at"))
    assert types_of(result.resource) == {"at": (TS, 0, True)}
    got = column_of(rows_of(runtime, tenant, result.resource.id), "at")
    assert got[0] == "2024-01-05T10:00:00Z"
    assert got[-1] == "2024-01-05T09:00:00.1Z"


# --- dialects and encodings --------------------------------------------------------------


def test_quoted_fields_with_newlines_delimiters_and_quotes(
    runtime: Runtime, tenant: Tenant
) -> None:
    content = (
        "id,memo,amount\r\n"
        '1,"line one\nline two",1.5\r\n'
        '2,"a, b; c | d\td",2\r\n'
        '3,"she said ""hi""",-0.25\r\n'
        '4,"",\r\n'
        '5,"crlf\r\ninside",3\r\n'
    )
    result = load(runtime, tenant, content)
    assert result.rows == 5
    assert types_of(result.resource) == {
        "id": (INT, 0, False),
        "memo": (T, 0, False),
        "amount": (D, 2, False),
    }
    rows = rows_of(runtime, tenant, result.resource.id)
    assert column_of(rows, "memo") == [
        "line one\nline two",
        "a, b; c | d\td",
        'she said "hi"',
        None,
        "crlf\r\ninside",
    ]
    assert texts(column_of(rows, "amount")) == ["1.50", "2.00", "-0.25", None, "3.00"]


@pytest.mark.parametrize("line_break", ["\r", "\n", "\r\n"])
def test_a_lone_line_break_in_a_value_beside_a_lone_quote(
    runtime: Runtime, tenant: Tenant, line_break: str
) -> None:
    # A value of one quote makes the checks and COPY disagree, so the rows are sent to
    # COPY as Python read them: a carriage return alone must be quoted there too
    content = f'memo,n\n"""",1\n"a{line_break}b",2\n'
    result = load(runtime, tenant, content)
    assert column_of(rows_of(runtime, tenant, result.resource.id), "memo") == [
        '"',
        f"a{line_break}b",
    ]


def test_a_header_label_with_a_carriage_return_beside_a_lone_quote(
    runtime: Runtime, tenant: Tenant
) -> None:
    result = load(runtime, tenant, 'id,"me\rmo"\n1,""""\n2,"x\ry"\n')
    assert column_of(rows_of(runtime, tenant, result.resource.id), "me\rmo") == ['"', "x\ry"]


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_delimiter_detected_past_long_multiline_records(
    runtime: Runtime, tenant: Tenant, delimiter: str
) -> None:
    # every record spans three lines: the sniffed sample ends inside a record
    records = [delimiter.join([str(i), f'"memo {i}\nmore\nend"', f"{i}.5"]) for i in range(30)]
    content = delimiter.join(["id", "memo", "amount"]) + "\n" + "\n".join(records) + "\n"
    result = load(runtime, tenant, content)
    assert [c.name for c in result.resource.columns] == ["id", "memo", "amount"]
    rows = rows_of(runtime, tenant, result.resource.id)
    assert len(rows) == 30
    assert rows[7] == {"id": 7, "memo": "memo 7\nmore\nend", "amount": Decimal("7.5")}


def test_latin1_file_is_read_as_declared(runtime: Runtime, tenant: Tenant) -> None:
    content = "name;café\nJosé;Zürich\nRenée;1,5\n".encode("latin-1")
    assert b"\xe9" in content
    result = load(runtime, tenant, content, encoding="latin-1")
    assert [c.name for c in result.resource.columns] == ["name", "café"]
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"name": "José", "café": "Zürich"},
        {"name": "Renée", "café": "1,5"},
    ]


def test_utf8_beyond_latin1(runtime: Runtime, tenant: Tenant) -> None:
    content = "\ufeffname,amount\nŁódź €,1.5\n日本,2\n"
    result = load(runtime, tenant, content.encode())
    assert [c.name for c in result.resource.columns] == ["name", "amount"]
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"name": "Łódź €", "amount": Decimal("1.50")},
        {"name": "日本", "amount": Decimal("2.00")},
    ]


def test_gzip_latin1_semicolon(runtime: Runtime, tenant: Tenant) -> None:
    content = gzip.compress("Konto;Betrag\nMüller;-0.05\nGärtner;12\n".encode("latin-1"))
    result = load(runtime, tenant, content, encoding="latin-1")
    rows = rows_of(runtime, tenant, result.resource.id)
    assert [r["Konto"] for r in rows] == ["Müller", "Gärtner"]
    assert texts(column_of(rows, "Betrag")) == ["-0.05", "12.00"]


def test_header_names_are_kept_as_written(runtime: Runtime, tenant: Tenant) -> None:
    content = 'bank.amount,"Amount (EUR)",amount,Amount, spaced ,"a,b"\n1,2,3,4,5,6\n'
    result = load(runtime, tenant, content)
    names = ["bank.amount", "Amount (EUR)", "amount", "Amount", " spaced ", "a,b"]
    assert [c.name for c in result.resource.columns] == names
    assert rows_of(runtime, tenant, result.resource.id) == [
        dict(zip(names, range(1, 7), strict=True))
    ]


def test_header_names_with_quotes_and_newlines(runtime: Runtime, tenant: Tenant) -> None:
    content = 'id,"two\nlines","say ""hi"""\r\n1,a,b\r\n2,"c\r\nd",e\r\n'
    result = load(runtime, tenant, content)
    names = ["id", "two\nlines", 'say "hi"']
    assert [c.name for c in result.resource.columns] == names
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"id": 1, "two\nlines": "a", 'say "hi"': "b"},
        {"id": 2, "two\nlines": "c\r\nd", 'say "hi"': "e"},
    ]


# --- later files -----------------------------------------------------------------------------


def test_later_file_with_columns_in_another_order(runtime: Runtime, tenant: Tenant) -> None:
    first = load(runtime, tenant, "id,name,amount,at\n1,a,1.25,2024-01-05T10:00:00Z\n")
    later = append(
        runtime, first.resource.id, "at;amount;id;name\n2024-01-06T10:00:00+02:00;-3.5;2;b\n;;3;\n"
    )
    assert later.rows == 2
    assert later.resource.row_count == 3
    assert later.resource.data_version == 2
    assert rows_of(runtime, tenant, first.resource.id) == [
        {"id": 1, "name": "a", "amount": Decimal("1.25"), "at": "2024-01-05T10:00:00Z"},
        {"id": 2, "name": "b", "amount": Decimal("-3.50"), "at": "2024-01-06T08:00:00Z"},
        {"id": 3, "name": None, "amount": None, "at": None},
    ]


@pytest.mark.parametrize("blank_lines", [False, True])
def test_later_file_widens_decimal_scale(
    runtime: Runtime, tenant: Tenant, blank_lines: bool
) -> None:
    first = load(runtime, tenant, "id,amount\n1,1.5\n2,-0.25\n3,\n")
    sep = "\n\n" if blank_lines else "\n"
    later = append(runtime, first.resource.id, sep.join(["amount,id", "0.125,4", "7,5"]) + sep)
    assert types_of(later.resource)["amount"] == (D, 3, False)
    rows = rows_of(runtime, tenant, first.resource.id)
    assert texts(column_of(rows, "amount")) == ["1.500", "-0.250", None, "0.125", "7.000"]
    assert column_of(rows, "id") == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("blank_lines", [False, True])
def test_later_file_widens_integer_to_decimal(
    runtime: Runtime, tenant: Tenant, blank_lines: bool
) -> None:
    first = load(runtime, tenant, "n\n1\n-2\n")
    sep = "\n\n" if blank_lines else "\n"
    later = append(runtime, first.resource.id, sep.join(["n", "3", "0.5", ""]))
    assert types_of(later.resource)["n"] == (D, 1, False)
    rows = rows_of(runtime, tenant, first.resource.id)
    assert texts(column_of(rows, "n")) == ["1.0", "-2.0", "3.0", "0.5"]


def test_later_file_widening_across_its_batches(runtime: Runtime, tenant: Tenant) -> None:
    first = load(runtime, tenant, "n\n1.5\n")
    values = ["2"] * BATCH_ROWS + ["0.125"]
    later = append(runtime, first.resource.id, many(values))
    assert types_of(later.resource)["n"] == (D, 3, False)
    got = texts(column_of(rows_of(runtime, tenant, first.resource.id), "n"))
    assert got[:2] == ["1.500", "2.000"]
    assert got[-1] == "0.125"
    assert len(got) == BATCH_ROWS + 2


def test_later_file_of_each_type(runtime: Runtime, tenant: Tenant) -> None:
    first = load(
        runtime,
        tenant,
        "t,i,b,d,ts,tz\nx,1,true,2024-01-05,2024-01-05 10:00:00,2024-01-05T10:00:00Z\n",
    )
    later = append(
        runtime,
        first.resource.id,
        "t,i,b,d,ts,tz\n007,-5,FALSE,2024-02-29,2024-02-29T23:59:59.500,"
        "2024-02-29T23:59:59.5-01:00\n,,,,2024-03-01,2024-03-01 00:00:00Z\n",
    )
    assert later.rows == 2
    assert rows_of(runtime, tenant, first.resource.id) == [
        {
            "t": "x",
            "i": 1,
            "b": True,
            "d": "2024-01-05",
            "ts": "2024-01-05T10:00:00",
            "tz": "2024-01-05T10:00:00Z",
        },
        {
            "t": "007",
            "i": -5,
            "b": False,
            "d": "2024-02-29",
            "ts": "2024-02-29T23:59:59.5",
            "tz": "2024-03-01T00:59:59.5Z",
        },
        {
            "t": None,
            "i": None,
            "b": None,
            "d": None,
            "ts": "2024-03-01T00:00:00",
            "tz": "2024-03-01T00:00:00Z",
        },
    ]


def test_placeholder_source_takes_columns_from_its_first_file(
    runtime: Runtime, tenant: Tenant
) -> None:
    source = runtime.sources.create_source(
        workspace_id=tenant.workspace_id, definition=SourceDefinition("hooked")
    )
    first = append(runtime, source.id, "Ref|bank.amount\nA-1|0.10\n")
    assert types_of(first.resource) == {"Ref": (T, 0, False), "bank.amount": (D, 2, False)}
    assert not first.resource.is_placeholder
    assert rows_of(runtime, tenant, source.id) == [{"Ref": "A-1", "bank.amount": Decimal("0.10")}]


# --- memory ------------------------------------------------------------------------------

# Peak anonymous memory, sampled from /proc: ru_maxrss is no use in a child of pytest
# (Linux carries the parent's peak across fork and exec), and VmHWM counts the
# database file pages SQLite maps, which are page cache, not the process's memory.
_MEMORY_SCRIPT = textwrap.dedent("""
    import json, re, sys, threading, time
    from pathlib import Path
    from tally.services.catalogue import SourceCatalogue, create_source_in
    from tally.services.loader.load import load_into
    from tally.storage.engine import create_database_engine, write_connection

    def anon_kb():
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"RssAnon:\\s+(\\d+) kB", status).group(1))

    url, workspace_id, path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    engine = create_database_engine(url)
    catalogue = SourceCatalogue(engine)
    with write_connection(engine) as conn, conn.begin():
        source = create_source_in(conn, workspace_id=workspace_id, name="big")
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], anon_kb())
            time.sleep(0.005)

    before = anon_kb()
    sampler = threading.Thread(target=sample)
    sampler.start()
    with write_connection(engine) as conn, conn.begin():  # the loader's transaction
        rows = load_into(conn, source.id, path).rows
    done.set()
    sampler.join()
    catalogue.index_resource(source.id)  # as a worker does after the load
    print(json.dumps({"before_kb": before, "peak_kb": peak[0], "rows": rows,
                      "id": source.id}))
""")


def write_big_csv(path: Path, target_bytes: int) -> int:
    """A generated CSV written in chunks, never held in memory; returns its row count."""
    rows = 0
    with path.open("w", encoding="utf-8", newline="") as handle:
        handle.write("id,booked_at,amount,currency,memo\n")
        while handle.tell() < target_bytes:
            handle.write(
                "".join(
                    f"{rows + i},2024-01-{(rows + i) % 28 + 1:02d}T10:{i % 60:02d}:00Z,"
                    f"{(rows + i) % 100000 - 50000}.{i % 100:02d},EUR,payment {rows + i}\n"
                    for i in range(20_000)
                )
            )
            rows += 20_000
    return rows


def test_loading_a_large_file_keeps_memory_flat(
    runtime: Runtime, tenant: Tenant, tmp_path: Path
) -> None:
    path = tmp_path / "big.csv"
    expected_rows = write_big_csv(path, 60 * 1024 * 1024)
    assert path.stat().st_size >= 60 * 1024 * 1024
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _MEMORY_SCRIPT,
            runtime.settings.effective_database_url(),
            str(tenant.workspace_id),
            str(path),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=240,
    )
    report = json.loads(out.stdout)
    assert report["rows"] == expected_rows
    growth_mb = (report["peak_kb"] - report["before_kb"]) / 1024
    assert growth_mb < 150, f"peak anonymous memory grew by {growth_mb:.0f} MB"
    # the rows are all there, typed: spot-check the last page
    last = rows_of_last_page(runtime, tenant, report["id"], expected_rows)
    n, i = expected_rows - 1, (expected_rows - 1) % 20_000
    assert last[-1] == {
        "id": n,
        "booked_at": f"2024-01-{n % 28 + 1:02d}T10:{i % 60:02d}:00Z",
        "amount": Decimal(f"{n % 100000 - 50000}.{i % 100:02d}"),
        "currency": "EUR",
        "memo": f"payment {n}",
    }


def rows_of_last_page(
    runtime: Runtime, tenant: Tenant, resource_id: int, total: int
) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, resource_id, page=-(-total // 100), page_size=100)


# --- indexes ---------------------------------------------------------------------------


def _index_names(runtime: Runtime, table: str) -> set[str]:
    with runtime.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            sql = "SELECT indexname FROM pg_indexes WHERE tablename = %(t)s"
        else:
            sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t"
        return {row[0] for row in conn.exec_driver_sql(sql, {"t": table})}


def test_a_loaded_source_gets_one_index_per_column_from_the_workers_job(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The load returns with its rows committed; the indexes come from the workers' job
    (decision 0010), once."""
    result = load(runtime, tenant, "id,amount,memo\n1,2.50,a\n2,3.75,b\n")
    table = result.resource.table_name
    assert not any(name.startswith(f"ix_{table}_") for name in _index_names(runtime, table))
    assert read_data(runtime, tenant, result.resource.id, ordering="-amount")[0]["id"] == 2
    assert runtime.catalogue.finish_one_unfinished() is True
    expected = {f"ix_{table}_{c.physical}" for c in result.resource.columns}
    assert expected <= _index_names(runtime, table)
    with runtime.engine.connect() as conn:
        resource = resources.get_resource(conn, result.resource.id)
    assert resource.indexed_version == resource.data_version
    assert runtime.catalogue.finish_one_unfinished() is False


def test_a_new_sources_row_ids_are_keyed_by_the_workers_job(
    runtime: Runtime, tenant: Tenant
) -> None:
    """On PostgreSQL a new source's load commits its rows without the row ids' primary
    key (issue #36); its rows read the same, a later file appends after them, and the
    workers' job adds the key, once, before the rows' text and indexes. SQLite's row id
    is always its table's key."""
    result = load(runtime, tenant, "id,amount\n1,2.50\n2,3.75\n")
    table = result.resource.table_name
    postgresql = runtime.backend_name == "postgresql"
    if postgresql:
        assert primary_key(runtime.engine, table) is None
    path = write_file("id,amount\n3,4.00\n")
    try:  # a later file, with no worker since (`append_file` finishes the source itself)
        with write_connection(runtime.engine) as conn, conn.begin():
            load_into(conn, result.resource.id, path)
    finally:
        path.unlink()
    assert column_of(rows_of(runtime, tenant, result.resource.id), "id") == [1, 2, 3]
    assert runtime.catalogue.finish_one_unfinished() is True
    if postgresql:
        assert primary_key(runtime.engine, table) == f"{table}_pkey"
        with runtime.engine.connect() as conn:
            ids = conn.exec_driver_sql(f"SELECT _row_id FROM {table} ORDER BY _row_id").scalars()
            assert list(ids) == [1, 2, 3]
        with write_connection(runtime.engine) as conn, conn.begin():
            assert ddl.add_missing_primary_key(conn, table) is False  # once
    assert runtime.catalogue.finish_one_unfinished() is False
    assert column_of(rows_of(runtime, tenant, result.resource.id), "id") == [1, 2, 3]


def test_building_indexes_leaves_the_connection_as_configured(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Index builds use their own memory settings (on SQLite a smaller page cache, on
    PostgreSQL a larger maintenance_work_mem): the pooled connection must keep or get
    back its own setting after a load and after the builds, or every later query on it
    would run with the builder's."""
    setting = (
        "PRAGMA cache_size"
        if runtime.engine.dialect.name == "sqlite"
        else ("SHOW maintenance_work_mem")
    )
    with runtime.engine.connect() as conn:
        configured = conn.exec_driver_sql(setting).scalar_one()
    load(runtime, tenant, "id,memo\n1,a\n")
    with runtime.engine.connect() as conn:
        assert conn.exec_driver_sql(setting).scalar_one() == configured
    assert runtime.catalogue.finish_one_unfinished() is True  # the indexes
    with runtime.engine.connect() as conn:
        assert conn.exec_driver_sql(setting).scalar_one() == configured


# --- PostgreSQL: rows copied straight into their table -----------------------------------


def test_quoted_empty_values_are_missing_values(runtime: Runtime, tenant: Tenant) -> None:
    """The checks cannot tell `""` from an empty field; neither may what is stored."""
    result = load(runtime, tenant, 'id,memo\n1,""\n2,x\n3,\n')
    assert rows_of(runtime, tenant, result.resource.id) == [
        {"id": 1, "memo": None},
        {"id": 2, "memo": "x"},
        {"id": 3, "memo": None},
    ]


def straight_copy(
    request: pytest.FixtureRequest, tmp_path: Path, content: str
) -> tuple[bool, list[tuple[Any, ...]]]:
    """Load `content` as a placeholder's first file through PostgreSQL's bulk load, as
    load_into does: (were the rows copied straight into the table, the stored rows)."""
    engine = create_database_engine(
        make_settings(request, "postgresql", tmp_path / "home").effective_database_url()
    )
    path = write_file(content)
    try:
        file_format = detect_format(path)
        placeholder = Resource(1, 1, None, "s", "source", (), True, 0, 0, 0, 0)
        expected = expected_columns(
            read_head(path, file_format, batches=GUESS_BATCHES), placeholder
        )
        assert expected is not None
        with engine.connect() as conn, conn.begin():
            bulk = PostgresBulkLoad(conn, "r_test")
            raw = RawFile(
                lambda: utf8_chunks(path, file_format),
                len(expected.columns),
                file_format.delimiter,
            )
            bulk.stage(raw, expected)
            first = first_pass(path, file_format, None)
            straight = bulk.settle(first.reading(), first.ordered)
            if not straight:
                ddl.create_table(conn, "r_test", first.ordered)
                bulk.append(first.ordered, first.shapes, row_batches(path, file_format, None))
            bulk.abort()
            names = ", ".join(c.physical for c in first.ordered)
            stored = conn.exec_driver_sql(f"SELECT {names} FROM r_test ORDER BY _row_id").all()
            return straight, [tuple(row) for row in stored]
    finally:
        path.unlink()
        engine.dispose()


def test_postgresql_copies_rows_straight_into_their_table(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Columns guessed from the first batch hold for the whole file: COPY wrote the
    rows into the table while the checks ran, and they are kept."""
    straight, stored = straight_copy(
        request, tmp_path, 'id,amount,at,memo\n1,10.5,2024-01-05T10:30:00+02:00,"a, b"\n2,,,""\n'
    )
    assert straight
    assert stored == [
        (1, Decimal("10.5"), dt.datetime(2024, 1, 5, 8, 30, tzinfo=dt.UTC), "a, b"),
        (2, None, None, None),
    ]


@pytest.mark.parametrize(
    ("first", "late", "stored"),
    [
        ("1", "1.5", Decimal("1.5")),  # COPY refuses it for the guessed BIGINT: staged
        ("1", "007", "007"),  # COPY takes it as 7, the checks make the column text
        ("1.5", "1.25", Decimal("1.25")),  # COPY rounds it to 1.3 at the guessed scale
        ("a", 'say "hi"', 'say "hi"'),  # COPY reads 'say hi': PostgreSQL's quoting
    ],
)
def test_postgresql_keeps_no_straight_copy_the_whole_file_contradicts(
    request: pytest.FixtureRequest, tmp_path: Path, first: str, late: str, stored: object
) -> None:
    values = [first] * BATCH_ROWS + [late]
    straight, rows = straight_copy(request, tmp_path, many(values))
    assert not straight
    assert rows[-1] == (stored,)
    assert len(rows) == BATCH_ROWS + 1


def test_indexes_a_stopped_process_left_unbuilt_are_built_by_a_worker(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Rows committed, then the process stops before building their indexes: a worker's
    job builds them, once, without waiting for the source's next file."""
    path = write_file("id,amount\n1,2.50\n2,3.75\n")
    try:
        with write_connection(runtime.engine) as conn, conn.begin():
            resource = catalogue.create_source_in(conn, workspace_id=tenant.workspace_id, name="s")
            load_into(conn, resource.id, path)
    finally:
        path.unlink()
    table = resource.table_name
    assert not any(name.startswith(f"ix_{table}_") for name in _index_names(runtime, table))
    worker = Worker(runtime, concurrency=1, poll_seconds=0.05)
    worker.start()
    try:

        def indexed() -> bool:
            with runtime.engine.connect() as conn:
                return bool(resources.get_resource(conn, resource.id).indexed_version)

        eventually(indexed, timeout=60, what=f"the worker to index resource {resource.id}")
    finally:
        worker.stop()
    assert {f"ix_{table}_c0", f"ix_{table}_c1"} <= _index_names(runtime, table)
    assert runtime.catalogue.finish_one_unfinished() is False  # none left
