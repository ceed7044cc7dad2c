"""The CSV export's bytes for random values of every column type, both backends: each
line is built by the database (storage/resource_tables/csv_lines.py), and must be the
very line Python's `csv` writer makes of the Data API's values for the same view (RFC
4180: quotes only where a value holds a quote, a comma, CR or LF; a missing value
empty; a row of one empty field `""`), and read back by the `csv` module as those
values."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.console import make_user, sign_in
from support.data_api import api_rows
from support.factories import Tenant, make_source
from tally.runtime import Runtime

# Text that needs quoting (often: half the texts are made of those characters alone),
# unicode beyond the BMP, spaces; no NUL (no database keeps it) and no surrogate.
AWKWARD = st.sampled_from(['"', ",", "\n", "\r", " ", "a", "é", "€", "😀", "\\", ".", "'"])
TEXT = st.one_of(
    st.text(AWKWARD, min_size=1, max_size=6),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1),
)
MISSING = st.none()


def decimals(scale: int) -> st.SearchStrategy[str]:
    """A decimal's text with `scale` digits, negative or huge (18 digits at most: the
    scaled integer SQLite keeps)."""
    return st.integers(-(10**17), 10**17).map(lambda n: f"{Decimal(n).scaleb(-scale):f}")


DATES = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(lambda d: d.isoformat())
NAIVE = st.datetimes(
    dt.datetime.fromisoformat("1900-01-01"), dt.datetime.fromisoformat("9999-12-30")
)
TIMESTAMPS = NAIVE.map(lambda t: t.isoformat())
OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
AWARE = st.builds(lambda t, tz: t.replace(tzinfo=tz).isoformat(), NAIVE, OFFSETS)


@st.composite
def sources(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[str | None]]]:
    """Declared columns of every type (two decimals of random scales) and their rows."""
    scales = draw(st.lists(st.integers(0, 8), min_size=2, max_size=2))
    columns: list[tuple[dict[str, Any], st.SearchStrategy[str]]] = [
        ({"name": "memo", "type": "text"}, TEXT),
        ({"name": "id", "type": "integer"}, st.integers(-(2**63) + 1, 2**63 - 1).map(str)),
        ({"name": "amount", "type": "decimal", "scale": scales[0]}, decimals(scales[0])),
        ({"name": "fee", "type": "decimal", "scale": scales[1]}, decimals(scales[1])),
        ({"name": "on", "type": "date"}, DATES),
        ({"name": "at", "type": "timestamp", "timezone": False}, TIMESTAMPS),
        ({"name": "at utc", "type": "timestamp", "timezone": True}, AWARE),
        ({"name": "flag", "type": "boolean"}, st.booleans().map(str)),
        ({"name": 'note, "quoted"\n', "type": "text"}, TEXT),
    ]
    rows = draw(
        st.lists(
            st.tuples(*(st.one_of(MISSING, values) for _, values in columns)).map(list),
            min_size=1,
            max_size=6,
        )
    )
    return [column for column, _ in columns], rows


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


@pytest.fixture
def browser(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> httpx.Client:
    user = make_user(runtime, tenant.workspace_id, "viewer")
    assert sign_in(api, user.name).status_code == 303
    return api


@settings(
    deadline=None,
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(source=sources(), one_field=st.sampled_from([None, "memo", "amount", "flag"]))
def test_the_export_is_the_csv_of_the_data_apis_values(
    browser: httpx.Client,
    runtime: Runtime,
    tenant: Tenant,
    source: tuple[list[dict[str, Any]], list[list[str | None]]],
    one_field: str | None,
) -> None:
    columns, rows = source
    header = [c["name"] for c in columns]
    made = make_source(
        runtime.engine, tenant, csv_text(header, rows), declared={"columns": columns}
    )
    view = [("ordering", "_row")] + ([("fields", one_field)] if one_field else [])
    export = browser.get(f"/console/resources/{made.id}/export.csv", params=view)
    assert export.status_code == 200, export.text
    expected = api_rows(browser, tenant, made.id, view)
    assert len(expected) == len(rows)
    shown = [one_field] if one_field else header
    assert export.content.decode() == csv_text(shown, expected)
    read = list(csv.reader(io.StringIO(export.content.decode(), newline="")))
    assert read == [shown, *expected]
