"""The loader's side of core/columns.py: exact scaled decimals and canonical timestamps."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tally.core.columns import (
    INT64_MAX,
    Column,
    ColumnType,
    canonical_timestamp,
    format_scaled,
    scale_decimal,
    stored_value_converter,
)

# --- scaled decimals ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scale", "stored"),
    [
        ("12.5", 2, 1250),
        ("12", 2, 1200),
        ("-0.05", 2, -5),
        ("-0.5", 3, -500),
        ("+1.5", 1, 15),
        ("0", 0, 0),
        ("-0", 2, 0),
        ("42", 0, 42),
        ("12345678901234567.89", 2, 1234567890123456789),
        ("92233720368547758.07", 2, INT64_MAX),
        ("0.000000000000000001", 18, 1),
    ],
)
def test_scale_decimal(text: str, scale: int, stored: int) -> None:
    assert scale_decimal(text, scale) == stored


@pytest.mark.parametrize(
    ("stored", "scale", "text"),
    [
        (1250, 2, "12.50"),
        (-5, 2, "-0.05"),
        (-500, 3, "-0.500"),
        (0, 2, "0.00"),
        (-100, 2, "-1.00"),
        (7, 0, "7"),
        (-7, 0, "-7"),
        (1234567890123456789, 2, "12345678901234567.89"),
        (INT64_MAX, 2, "92233720368547758.07"),
        (-INT64_MAX - 1, 2, "-92233720368547758.08"),
        (1, 18, "0.000000000000000001"),
    ],
)
def test_format_scaled(stored: int, scale: int, text: str) -> None:
    assert format_scaled(stored, scale) == text


@given(
    st.integers(min_value=0, max_value=18).flatmap(
        lambda scale: st.tuples(
            st.just(scale),
            st.decimals(
                min_value=-(10**6),
                max_value=10**6,
                places=scale,
                allow_nan=False,
                allow_infinity=False,
            ),
        )
    )
)
def test_scaled_decimal_round_trip(case: tuple[int, Decimal]) -> None:
    scale, value = case
    text = format(value, "f")
    stored = scale_decimal(text, scale)
    assert stored == int(value.scaleb(scale))
    assert Decimal(format_scaled(stored, scale)) == value
    assert format_scaled(stored, scale) == format(value.quantize(Decimal(1).scaleb(-scale)), "f")


@given(st.integers(min_value=-(2**63), max_value=INT64_MAX), st.integers(min_value=0, max_value=19))
def test_format_then_scale_is_the_identity(stored: int, scale: int) -> None:
    text = format_scaled(stored, scale)
    assert scale_decimal(text, scale) == stored
    assert Decimal(text) == Decimal(stored).scaleb(-scale)


@given(
    st.lists(st.integers(min_value=-(10**12), max_value=10**12), min_size=2, max_size=2),
    st.integers(min_value=0, max_value=6),
)
def test_scaled_order_is_numeric_order(pair: list[int], scale: int) -> None:
    a, b = pair
    assert (a < b) == (Decimal(format_scaled(a, scale)) < Decimal(format_scaled(b, scale)))


# --- canonical timestamps ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical", "aware"),
    [
        ("2024-01-05T10:30:00", "2024-01-05T10:30:00", False),
        ("2024-01-05 10:30:00", "2024-01-05T10:30:00", False),
        ("2024-01-05T10:30", "2024-01-05T10:30:00", False),
        ("2024-01-05", "2024-01-05T00:00:00", False),
        ("2024-01-05T10:30:00.120000", "2024-01-05T10:30:00.12", False),
        ("2024-01-05T10:30:00.000000", "2024-01-05T10:30:00", False),
        ("2024-01-05T10:30:00.000001", "2024-01-05T10:30:00.000001", False),
        ("2024-01-05T10:30:00Z", "2024-01-05T10:30:00", True),
        ("2024-01-05T10:30:00z", "2024-01-05T10:30:00", True),
        ("2024-01-05T10:30:00+02:00", "2024-01-05T08:30:00", True),
        ("2024-01-05T23:30:00-0130", "2024-01-06T01:00:00", True),
        ("2024-12-31T23:30:00-01:00", "2025-01-01T00:30:00", True),
        ("2024-03-01T00:15:00+00:30", "2024-02-29T23:45:00", True),
        ("2024-01-05 10:30:00.250+01:00", "2024-01-05T09:30:00.25", True),
        ("2024-01-05T10:30+01:00", "2024-01-05T09:30:00", True),
        ("0001-01-01T00:30:00-01:00", "0001-01-01T01:30:00", True),
        ("9999-12-31T23:00:00+02:00", "9999-12-31T21:00:00", True),
    ],
)
def test_canonical_timestamp(text: str, canonical: str, aware: bool) -> None:
    assert canonical_timestamp(text) == (canonical, aware)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("2024-02-30T10:00:00", "day is out of range"),
        ("2023-02-29", "day is out of range"),
        ("2024-01-05T24:00:00", "not an ISO 8601 timestamp"),
        ("2024-01-05T10:60:00", "not an ISO 8601 timestamp"),
        ("2024-01-05T10:30:00.1234567", "not an ISO 8601 timestamp"),
        ("2024-01-05T10:30:00+24:00", "not an ISO 8601 timestamp"),
        ("2024-1-05", "not an ISO 8601 timestamp"),
        ("05/01/2024", "not an ISO 8601 timestamp"),
        ("", "not an ISO 8601 timestamp"),
        ("9999-12-31T23:00:00-02:00", "out of range in UTC"),  # year 10000 in UTC
        ("0001-01-01T00:30:00+01:00", "out of range in UTC"),  # year 0 in UTC
    ],
)
def test_canonical_timestamp_rejects(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        canonical_timestamp(text)


_EARLIEST = dt.datetime(1900, 1, 1)  # noqa: DTZ001 - hypothesis takes naive bounds
_LATEST = dt.datetime(2200, 1, 1)  # noqa: DTZ001
_moments = st.datetimes(min_value=_EARLIEST, max_value=_LATEST)
_offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
)


@given(_moments, _offsets)
def test_offsets_are_converted_to_utc(moment: dt.datetime, offset: dt.timezone) -> None:
    aware = moment.replace(tzinfo=offset)
    canonical, had_offset = canonical_timestamp(aware.isoformat())
    assert had_offset
    utc = aware.astimezone(dt.UTC).replace(tzinfo=None)
    assert dt.datetime.fromisoformat(canonical) == utc
    assert not canonical.endswith("0") or "." not in canonical  # trailing zeros trimmed


@given(_moments, _moments, _offsets, _offsets)
def test_canonical_text_order_is_time_order(
    a: dt.datetime, b: dt.datetime, offset_a: dt.timezone, offset_b: dt.timezone
) -> None:
    a, b = a.replace(tzinfo=offset_a), b.replace(tzinfo=offset_b)
    text_a = canonical_timestamp(a.isoformat())[0]
    text_b = canonical_timestamp(b.isoformat(sep=" "))[0]
    assert (text_a < text_b) == (a < b)
    assert (text_a == text_b) == (a == b)


# --- stored values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "text", "stored"),
    [
        (Column("n", "c0", ColumnType.INTEGER), "-5", -5),
        (Column("n", "c0", ColumnType.INTEGER), "+5", 5),
        (Column("n", "c0", ColumnType.INTEGER), "9223372036854775807", INT64_MAX),
        (Column("n", "c0", ColumnType.INTEGER), "", None),
        (Column("d", "c0", ColumnType.DECIMAL, 2), "1.5", 150),
        (Column("d", "c0", ColumnType.DECIMAL, 2), "-0.05", -5),
        (Column("d", "c0", ColumnType.DECIMAL, 2), "3", 300),
        (Column("d", "c0", ColumnType.DECIMAL, 2), "", None),
        (Column("b", "c0", ColumnType.BOOLEAN), "TRUE", True),
        (Column("b", "c0", ColumnType.BOOLEAN), "fAlSe", False),
        (Column("b", "c0", ColumnType.BOOLEAN), "", None),
        (Column("t", "c0", ColumnType.TIMESTAMP), "2024-01-05 10:30", "2024-01-05T10:30:00"),
        (Column("t", "c0", ColumnType.TIMESTAMP), "2024-01-05", "2024-01-05T00:00:00"),
        (
            Column("t", "c0", ColumnType.TIMESTAMP, timezone=True),
            "2024-01-05T10:30:00.500+01:00",
            "2024-01-05T09:30:00.5",
        ),
        (Column("t", "c0", ColumnType.TIMESTAMP), "", None),
        (Column("d", "c0", ColumnType.DATE), "2024-02-29", "2024-02-29"),
        (Column("d", "c0", ColumnType.DATE), "", None),
        (Column("x", "c0", ColumnType.TEXT), "007", "007"),
        (Column("x", "c0", ColumnType.TEXT), " ", " "),
        (Column("x", "c0", ColumnType.TEXT), "", None),
    ],
)
def test_stored_value_converter(column: Column, text: str, stored: object) -> None:
    value = stored_value_converter(column)(text)
    assert value == stored
    assert type(value) is type(stored)
