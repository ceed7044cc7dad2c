"""core/columns.py: canonical timestamps."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tally.core.columns import canonical_timestamp

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
