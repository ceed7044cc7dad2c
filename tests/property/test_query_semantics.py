"""Random tables, random filters, orderings, fields and pages: tally answers exactly what
the plain reference model (reference.py) answers, on SQLite and on PostgreSQL, both by
SQL and from column snapshots (decision 0014: every filtered request once one is built).

Each example writes a small CSV whose columns are typed on purpose, loads it through
the catalogue (the real loader, the real bulk load), checks the loader inferred the
intended types, then runs several random queries through the Data API's read service.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from reference import RefColumn, RefRejectedError, RefTable, RefUnmodelledError, run_query

from support.databases import make_settings
from support.factories import Tenant, make_source, read_envelope
from tally.core.errors import QueryNotApplicableError
from tally.runtime import Runtime, build_runtime
from tally.storage.resources import Resource

INT64_MAX = 2**63 - 1
KINDS = ("integer", "decimal", "date", "timestamp", "timestamp_naive", "boolean", "text")
# Labels with '__' and dots: a filter key resolves to an exact column name first.
# `_row`: a column of its own with a system column's name keeps the name.
NAMES = (
    "id",
    "amount",
    "Amount",
    "a__b",
    "x",
    "x__gt",
    "x__in",
    "p.col",
    "Été",
    "n__exact",
    "_row",
)
# Commas split in-lists, quotes, backslashes and newlines test the CSV paths; U+FF5A sorts
# below U+1F600 by code point but above it in UTF-16.
TEXT_ALPHABET = "aAbZz01 é中ｚ😀,\"'\\-\n"
# TALLY_PROPERTY_EXAMPLES=500 for a deeper local run.
EXAMPLES = int(os.environ.get("TALLY_PROPERTY_EXAMPLES", "120"))
QUERIES_PER_TABLE = 5
# Shrinking reloads a table per step and can take minutes: on only when asked
# (TALLY_PROPERTY_SHRINK=1). A failure prints its CSV, its query and the seed anyway.
PHASES = tuple(p for p in Phase if p is not Phase.shrink or os.environ.get("TALLY_PROPERTY_SHRINK"))


@pytest.fixture(params=["sql", "snapshots"])
def runtime(request: pytest.FixtureRequest, backend: str, tmp_path: Any) -> Iterator[Runtime]:
    """Filtered requests answered by SQL alone, or from column snapshots of every
    resource however small (`load` waits for each table's snapshot)."""
    if request.param == "snapshots":
        overrides: dict[str, int] = {"snapshot_min_rows": 0}
    else:
        overrides = {"snapshot_memory_mb": 0}
    built = build_runtime(make_settings(request, backend, tmp_path / "home", **overrides))
    yield built
    built.close()


@dataclass(frozen=True)
class GenColumn:
    name: str
    kind: str
    scale: int = 0  # decimal: digits each value is drawn with
    uniform: bool = True  # decimal: every value keeps all `scale` digits


@dataclass(frozen=True)
class GenTable:
    columns: tuple[GenColumn, ...]
    cells: tuple[tuple[str, ...], ...]  # rows of CSV text
    newline: str = "\n"
    blank_after: frozenset[int] = frozenset()  # rows followed by a blank line (no record)

    def csv_text(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator=self.newline)
        writer.writerow([c.name for c in self.columns])
        for i, row in enumerate(self.cells):
            writer.writerow(row)
            if i in self.blank_after:
                buffer.write(self.newline)
        return buffer.getvalue()

    def column_cells(self, index: int) -> list[str]:
        return [row[index] for row in self.cells]

    def intended(self) -> tuple[RefColumn, ...]:
        """The type each column must be inferred as (all-empty columns are text)."""
        out = []
        for i, column in enumerate(self.columns):
            filled = [v for v in self.column_cells(i) if v]
            kind = column.kind if filled else "text"
            scale = max((len(v.partition(".")[2]) for v in filled), default=0)
            if kind == "timestamp_naive":
                out.append(RefColumn(column.name, "timestamp"))
            elif kind == "timestamp":
                out.append(RefColumn(column.name, "timestamp", timezone=True))
            elif kind == "decimal":
                out.append(RefColumn(column.name, "decimal", scale=scale))
            else:
                out.append(RefColumn(column.name, kind))
        return tuple(out)


# --- value texts ---------------------------------------------------------------------


def _integer_texts() -> st.SearchStrategy[str]:
    numbers = st.one_of(
        st.integers(-60, 60),
        st.integers(-INT64_MAX, INT64_MAX),
        st.sampled_from([INT64_MAX, -INT64_MAX]),
    )
    return st.builds(lambda n, plus: f"+{n}" if plus and n > 0 else str(n), numbers, st.booleans())


def _scaled_text(units: int, scale: int, keep: int, plus: bool) -> str:
    """units / 10**scale written with `keep` of its `scale` digits when they are zeros."""
    sign = "-" if units < 0 else ("+" if plus else "")
    whole, fraction = divmod(abs(units), 10**scale)
    digits = f"{fraction:0{scale}d}"
    while len(digits) > keep and digits.endswith("0"):
        digits = digits[:-1]
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"


def _decimal_texts(column: GenColumn) -> st.SearchStrategy[str]:
    units = st.one_of(
        st.integers(-3000, 3000),
        st.integers(-INT64_MAX, INT64_MAX),
        st.sampled_from([INT64_MAX, -INT64_MAX]),
    )
    keep = st.just(column.scale) if column.uniform else st.integers(0, column.scale)
    return st.builds(_scaled_text, units, st.just(column.scale), keep, st.booleans())


def _dates() -> st.SearchStrategy[dt.date]:
    return st.dates(dt.date(1000, 1, 1), dt.date(2999, 12, 31))


# Naive on purpose: moments in UTC, written with or without an offset.
EARLIEST = dt.datetime(1970, 1, 1)  # noqa: DTZ001
LATEST = dt.datetime(2100, 1, 1)  # noqa: DTZ001


def _moments() -> st.SearchStrategy[dt.datetime]:
    whole_seconds = st.datetimes(EARLIEST, LATEST).map(lambda m: m.replace(microsecond=0))
    return whole_seconds | st.datetimes(EARLIEST, LATEST)


def _clock(moment: dt.datetime, separator: str = "T") -> str:
    text = moment.strftime(f"%Y-%m-%d{separator}%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text


@st.composite
def _aware_text(draw: st.DrawFn, moment: dt.datetime | None = None) -> str:
    """A UTC moment written with Z (mostly) or in some other offset."""
    utc = moment or draw(_moments())
    form = draw(st.sampled_from(["Z", "Z", "Z", "z", "+HH:MM", "-HHMM"]))
    if form in ("Z", "z"):
        return _clock(utc) + form
    minutes = draw(st.integers(0, 14 * 60))
    sign = "+" if form[0] == "+" else "-"
    local = utc + dt.timedelta(minutes=minutes if sign == "+" else -minutes)
    hours, rest = divmod(minutes, 60)
    offset = f"{sign}{hours:02d}:{rest:02d}" if ":" in form else f"{sign}{hours:02d}{rest:02d}"
    return _clock(local) + offset


@st.composite
def _naive_text(draw: st.DrawFn) -> str:
    moment = draw(_moments())
    form = draw(st.sampled_from(["T", "T", "space", "minutes", "date"]))
    if form == "date":
        return moment.date().isoformat()
    if form == "minutes":
        return moment.strftime("%Y-%m-%dT%H:%M")
    return _clock(moment, " " if form == "space" else "T")


def value_texts(column: GenColumn) -> st.SearchStrategy[str]:
    """Texts of one value of the column's kind, in the forms the loader accepts."""
    kind = column.kind
    if kind == "integer":
        return _integer_texts()
    if kind == "decimal":
        return _decimal_texts(column)
    if kind == "date":
        return _dates().map(dt.date.isoformat)
    if kind == "timestamp":
        return _aware_text()
    if kind == "timestamp_naive":
        return _naive_text()
    if kind == "boolean":
        return st.sampled_from(["true", "false", "true", "false", "True", "FALSE"])
    return st.text(TEXT_ALPHABET, min_size=1, max_size=4)


# --- tables --------------------------------------------------------------------------


# The only narrower kind TEXT_ALPHABET can spell: an integer ("-0", "10").
_SIGNED_DIGITS = re.compile(r"-?[0-9]+")


def _fix_up(column: GenColumn, cells: list[str]) -> list[str]:
    """Make sure the values really have the column's kind (not a narrower one)."""
    filled = [i for i, v in enumerate(cells) if v]
    if not filled:
        return cells
    first = filled[0]
    if column.kind == "decimal" and not any("." in cells[i] for i in filled):
        cells[first] = cells[first] + "." + "5" * column.scale
    elif column.kind == "timestamp_naive" and all(len(cells[i]) == 10 for i in filled):
        cells[first] = cells[first] + "T12:30:00"
    elif column.kind == "text" and all(_SIGNED_DIGITS.fullmatch(cells[i]) for i in filled):
        cells[first] = "a" + cells[first]  # "-0" and "10" would be integers
    return cells


@st.composite
def tables(draw: st.DrawFn) -> GenTable:
    width = draw(st.integers(2, 5))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=width, max_size=width, unique=True))
    columns = []
    for name in names:
        kind = draw(st.sampled_from(KINDS))
        scale = draw(st.integers(1, 4)) if kind == "decimal" else 0
        columns.append(GenColumn(name, kind, scale, draw(st.booleans())))
    height = draw(st.integers(0, 60))
    by_column = []
    for column in columns:
        # a few distinct values, so ties and matches are common
        pool = draw(st.lists(value_texts(column), min_size=1, max_size=8))
        empties = draw(st.sampled_from([0, 0, 1, 3, 12]))
        cells = draw(
            st.lists(st.sampled_from(pool + [""] * empties), min_size=height, max_size=height)
        )
        by_column.append(_fix_up(column, cells))
    rows = tuple(zip(*by_column, strict=True)) if height else ()
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    # blank lines hold no record; on PostgreSQL they send the load down its other path
    blank_after = draw(st.sets(st.integers(0, height - 1), max_size=2)) if height else set()
    return GenTable(tuple(columns), rows, newline, frozenset(blank_after))


# --- queries -------------------------------------------------------------------------


def _odd_text(draw: st.DrawFn, column: GenColumn, cells: list[str]) -> str:
    """Kind-specific awkward values: extra digits, other offsets, invalid texts."""
    kind = column.kind
    base = draw(st.sampled_from(cells)) if cells else draw(value_texts(column))
    if kind == "decimal":
        # digits beyond the column's scale (beyond 28 significant digits too): just
        # above a stored value, or just below it
        scale = max((len(v.partition(".")[2]) for v in cells), default=column.scale)
        units = int(Decimal(base) * 10**scale)
        k = draw(st.integers(1, 32) | st.integers(20, 32))
        above = _scaled_text(units, scale, scale, plus=False) + "0" * k + "1"
        below = _scaled_text(units - 1, scale, scale, plus=False) + "9" * k
        huge = ["1" + "0" * 25, "-" + "9" * 30]
        return draw(st.sampled_from([above, below, above, below, *huge, "1e3", ".5", "x"]))
    if kind == "integer":
        return draw(st.sampled_from(["1.5", "007", "x", "10.0", base + "0"]))
    if kind == "date":
        return draw(st.sampled_from(["2024-02-30", "2024-1-01", "2023-02-28T00:00:00"]))
    if kind == "timestamp":
        if cells:
            moment = dt.datetime.fromisoformat(base.replace("z", "Z"))
            return draw(_aware_text(moment.astimezone(dt.UTC).replace(tzinfo=None)))
        return draw(st.sampled_from(["2024-01-01T24:00:00Z", "2024-01-01T10:00:00.1234567Z"]))
    if kind == "timestamp_naive":
        return draw(st.sampled_from([base[:10], base[:16], "2024-01-01T10:00:00Z", "x"]))
    if kind == "boolean":
        return draw(st.sampled_from(["maybe", "TRUE", "False", ""]))
    return draw(st.text(TEXT_ALPHABET, max_size=3))


def _filter_text(draw: st.DrawFn, column: GenColumn, cells: list[str]) -> str:
    filled = [v for v in cells if v]
    source = draw(st.sampled_from(["cell", "cell", "cell", "fresh", "empty", "odd", "odd"]))
    if source == "cell" and filled:
        return draw(st.sampled_from(filled))
    if source == "empty":
        return ""
    if source == "odd":
        return _odd_text(draw, column, filled)
    return draw(value_texts(column))


@dataclass(frozen=True)
class GenQuery:
    filters: tuple[tuple[str, str], ...]
    fields: str | None
    ordering: str | None
    page: int
    page_size: int


def _row_text(draw: st.DrawFn, table: GenTable) -> str:
    """A filter value for `_row`: near the row ids (a fresh source's are 1, 2, 3...),
    now and then empty or not an integer."""
    return draw(
        st.one_of(
            st.integers(-1, len(table.cells) + 2).map(str),
            st.sampled_from(["", "1.5", "x", str(INT64_MAX + 1)]),
        )
    )


@st.composite
def queries(draw: st.DrawFn, table: GenTable) -> GenQuery:
    names = [c.name for c in table.columns]
    filters = []
    for _ in range(draw(st.integers(0, 3))):
        index = draw(st.integers(0, len(names)))  # len(names): the system column `_row`
        op = draw(st.sampled_from(["", "exact", "gt", "gte", "lt", "lte", "in", "in"]))
        name = "_row" if index == len(names) else names[index]
        key = f"{name}__{op}" if op else name
        if index == len(names):
            text = partial(_row_text, draw, table)
        else:
            text = partial(_filter_text, draw, table.columns[index], table.column_cells(index))
        if op == "in":
            items = draw(st.lists(st.just(0), min_size=1, max_size=4))
            value = ",".join(text() for _ in items)
        else:
            value = text()
        filters.append((key, value))
    names.append("_row")
    fields = None
    if draw(st.booleans()):
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names) + 1))
        fields = ",".join(chosen)
    ordering = None
    if draw(st.integers(0, 3)):
        ordering = draw(st.sampled_from(["", "-"])) + draw(st.sampled_from(names))
    page_size = draw(st.one_of(st.integers(1, 25), st.just(1000), st.just(20000)))
    last = max(1, math.ceil(len(table.cells) / page_size))
    page = draw(st.integers(1, last + 1))
    return GenQuery(tuple(filters), fields, ordering, page, page_size)


# --- comparing -------------------------------------------------------------------------


def _tagged(value: Any) -> tuple[str, Any]:
    """A value with its JSON type: True is not 1, and 12.50 is not 12.5."""
    return type(value).__name__, str(value) if isinstance(value, Decimal) else value


def comparable(envelope: dict[str, Any]) -> dict[str, Any]:
    return {
        "data": [[(k, *_tagged(v)) for k, v in row.items()] for row in envelope["data"]],
        "meta": {k: _tagged(v) for k, v in envelope["meta"].items()},
    }


def read(runtime: Runtime, tenant: Tenant, resource: Resource, query: GenQuery) -> Any:
    return read_envelope(
        runtime,
        tenant,
        resource.id,
        filters=query.filters,
        fields=query.fields,
        ordering=query.ordering,
        page=query.page,
        page_size=query.page_size,
    )


def check_query(
    runtime: Runtime, tenant: Tenant, resource: Resource, model: RefTable, query: GenQuery
) -> None:
    note(f"query: {query}")
    try:
        expected = run_query(
            model,
            query.filters,
            fields=query.fields,
            ordering=query.ordering,
            page=query.page,
            page_size=query.page_size,
        )
    except RefUnmodelledError:
        return
    except RefRejectedError:
        with pytest.raises(QueryNotApplicableError):
            read(runtime, tenant, resource, query)
        return
    assert comparable(read(runtime, tenant, resource, query)) == comparable(expected)


def load(runtime: Runtime, tenant: Tenant, table: GenTable) -> tuple[Resource, RefTable]:
    """Load the table as a source; check the loader typed it as intended."""
    text = table.csv_text()
    note(f"csv:\n{text}")
    resource = make_source(runtime.engine, tenant, text)
    intended = table.intended()
    assert [(c.name, c.type.value, c.scale, c.timezone) for c in resource.columns] == [
        (c.name, c.type, c.scale, c.timezone) for c in intended
    ]
    assert resource.row_count == len(table.cells)
    model = RefTable.from_cells(intended, table.cells)
    if "_row" not in {c.name for c in table.columns}:  # else the own column has the name
        everything = GenQuery((), "_row", None, 1, 10000)
        ids = [row["_row"] for row in read(runtime, tenant, resource, everything)["data"]]
        model = model.with_row_ids(ids)
    return snapshot_ready(runtime, resource), model


def snapshot_ready(runtime: Runtime, resource: Resource) -> Resource:
    """Where `resource` gets a snapshot (the `runtime` fixture's "snapshots"), wait until
    it is built, so that every filtered read after this is answered from it."""
    snapshots = runtime.data_query.snapshots
    large = resource.row_count >= runtime.settings.snapshot_min_rows
    if snapshots is not None and snapshots.enabled and large:
        snapshots.find(resource)
        snapshots.wait()
        assert snapshots.find(resource) is not None, "the snapshot answers every filtered read"
    return resource


def forget_row_json(runtime: Runtime, resource: Resource, *, every: int) -> None:
    """Clear the stored JSON text of every `every`-th row (0: none, 1: all)."""
    if every:
        with runtime.engine.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE {resource.table_name} SET _json = NULL"
                f" WHERE _row_id - _row_id / {every} * {every} = 0"
            )


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(table=tables(), data=st.data())
def test_queries_answer_what_the_reference_answers(
    runtime: Runtime, tenant: Tenant, table: GenTable, data: st.DataObject
) -> None:
    resource, model = load(runtime, tenant, table)
    # rows with their JSON text stored (as a worker leaves them), with none (as a load
    # leaves them), or some of each
    forget_row_json(runtime, resource, every=data.draw(st.sampled_from([0, 1, 2, 3])))
    everything = GenQuery((), None, None, 1, 1000)
    check_query(runtime, tenant, resource, model, everything)
    for _ in range(QUERIES_PER_TABLE):
        check_query(runtime, tenant, resource, model, data.draw(queries(table)))


# --- regressions the property test found -------------------------------------------------


def _column(
    runtime: Runtime,
    tenant: Tenant,
    resource: Resource,
    filters: list[tuple[str, str]],
    name: str,
) -> list[Any]:
    """One column of the rows matching the filters, in insertion order."""
    query = GenQuery(tuple(filters), name, None, 1, 1000)
    body = read(runtime, tenant, resource, query)
    assert body["meta"]["total_count"] == len(body["data"])
    return [_tagged(row[name])[1] for row in body["data"]]


TINY = "0" * 30 + "1"  # past Decimal's default precision of 28 digits
NINES = "9" * 30


@pytest.mark.parametrize(
    ("key", "value", "amounts"),
    [
        ("amount", "12.50" + TINY, []),
        ("amount__in", f"12.50{TINY},12.49{NINES}", []),
        ("amount__gte", "12.50" + TINY, ["12.51"]),
        ("amount__lt", "12.50" + TINY, ["12.49", "12.50"]),
        ("amount__gt", "12.49" + NINES, ["12.50", "12.51"]),
        ("amount__lte", "12.49" + NINES, ["12.49"]),
    ],
)
def test_decimal_filters_with_many_digits_are_not_rounded(
    runtime: Runtime, tenant: Tenant, key: str, value: str, amounts: list[str]
) -> None:
    source = snapshot_ready(
        runtime, make_source(runtime.engine, tenant, "amount\n12.49\n12.50\n12.51\n")
    )
    assert _column(runtime, tenant, source, [(key, value)], "amount") == amounts


@pytest.mark.parametrize(
    ("key", "value", "numbers"),
    [
        ("flag__gt", "false", [1]),
        ("flag__gte", "false", [1, 2]),
        ("flag__lt", "true", [2]),
        ("flag__lte", "TRUE", [1, 2]),
        ("flag__lte", "false", [2]),
        ("flag", "true", [1]),
        ("flag__in", "false,", [2, 3]),
    ],
)
def test_booleans_compare_with_every_operator(
    runtime: Runtime, tenant: Tenant, key: str, value: str, numbers: list[int]
) -> None:
    source = snapshot_ready(
        runtime, make_source(runtime.engine, tenant, "flag,n\ntrue,1\nfalse,2\n,3\n")
    )
    assert _column(runtime, tenant, source, [(key, value)], "n") == numbers


def test_in_lists_mix_small_and_64_bit_numbers(runtime: Runtime, tenant: Tenant) -> None:
    big = str(INT64_MAX)
    text = f"n,amount\n5,0.05\n{big},92233720368547758.07\n-{big},-92233720368547758.07\n"
    source = snapshot_ready(runtime, make_source(runtime.engine, tenant, text))
    assert _column(runtime, tenant, source, [("n__in", f"5,{big}")], "n") == [5, INT64_MAX]
    assert _column(runtime, tenant, source, [("n__in", f"-{big},5")], "n") == [5, -INT64_MAX]
    amounts = _column(
        runtime, tenant, source, [("amount__in", "0.05,-92233720368547758.07")], "amount"
    )
    assert amounts == ["0.05", "-92233720368547758.07"]
