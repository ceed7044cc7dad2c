"""The one source of "now": always UTC, and passed in where a test needs another time."""

from __future__ import annotations

import datetime as dt


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def as_utc(moment: dt.datetime) -> dt.datetime:
    """SQLite hands back naive datetimes; everything tally stores is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
