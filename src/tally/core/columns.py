"""Column types: what a value of each type looks like, and how it is stored.

Pure code. Money is exact: a decimal is handled as a 64-bit integer scaled by
10**scale (the largest number of fractional digits seen), so every comparison is an
integer comparison and no binary float ever touches an amount; SQLite stores that
integer, PostgreSQL the same exact value as NUMERIC. Timestamps are handled as
canonical ISO text (UTC when the source carried offsets), whose byte order is
chronological order; SQLite stores that text, PostgreSQL its own timestamp types.
Dates are ISO text on both.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class ColumnType(StrEnum):
    TEXT = "text"
    INTEGER = "integer"
    DECIMAL = "decimal"
    DATE = "date"
    TIMESTAMP = "timestamp"
    BOOLEAN = "boolean"


@dataclass(frozen=True)
class Column:
    """One column of a resource: its label, its name in the database and its type."""

    name: str
    physical: str
    type: ColumnType
    scale: int = 0
    timezone: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "physical": self.physical, "type": self.type}
        if self.type is ColumnType.DECIMAL:
            out["scale"] = self.scale
        if self.type is ColumnType.TIMESTAMP:
            out["timezone"] = self.timezone
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Column:
        return cls(
            name=data["name"],
            physical=data["physical"],
            type=ColumnType(data["type"]),
            scale=int(data.get("scale", 0)),
            timezone=bool(data.get("timezone", False)),
        )


# System columns: every row's own, not among a resource's columns (nor in a page's
# default fields), but named in `fields`, filters and `ordering` like any column. A
# resource's own column of the same label keeps the name (docs/api.md).
# `_row`: the row's id (the hidden `_row_id`), unique, increasing in insertion order.
ROW_COLUMN = Column("_row", "_row_id", ColumnType.INTEGER)
# `_file_id`: a source's rows: the file whose delivery inserted the row (NULL: a
# `tally admin load`, or a row loaded before the column existed).
FILE_ID_COLUMN = Column("_file_id", "_file_id", ColumnType.INTEGER)


def system_columns(*, has_files: bool) -> tuple[Column, ...]:
    """The system columns of a resource: `_row`, and a source's `_file_id`."""
    return (ROW_COLUMN, FILE_ID_COLUMN) if has_files else (ROW_COLUMN,)


# Value shapes, one regular expression per type. Leading zeros ("007") make a value
# text: in finance files they are account numbers and codes, not quantities.
INTEGER_PATTERN = r"[+-]?(?:0|[1-9][0-9]*)"
DECIMAL_PATTERN = r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"
DATE_PATTERN = r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
_OFFSET = r"(?:Z|z|[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9])"
TIMESTAMP_NAIVE_PATTERN = DATE_PATTERN + r"[T ]" + _TIME
TIMESTAMP_AWARE_PATTERN = TIMESTAMP_NAIVE_PATTERN + _OFFSET
BOOLEAN_PATTERN = r"(?i:true|false)"

_INTEGER_RE = re.compile(INTEGER_PATTERN)
_DECIMAL_RE = re.compile(DECIMAL_PATTERN)
_DATE_RE = re.compile(DATE_PATTERN)
_TS_RE = re.compile(
    r"(?P<date>" + DATE_PATTERN + r")(?:[T ](?P<time>" + _TIME + r")(?P<offset>" + _OFFSET + r")?)?"
)
_BOOLEAN_WORDS = {
    "true": True,
    "false": False,
    "1": True,
    "0": False,
    "t": True,
    "f": False,
    "yes": True,
    "no": False,
}


def canonical_timestamp(text: str) -> tuple[str, bool]:
    """ISO text -> (canonical stored text, had an offset).

    The canonical form is 'YYYY-MM-DDTHH:MM:SS[.ffffff]' without trailing zeros in the
    fraction, in UTC when the value carried an offset, so that byte order is time order.
    Raises ValueError when the text is not a timestamp.
    """
    match = _TS_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"not an ISO 8601 timestamp: {text!r}")
    date_part, time_part, offset = match.group("date", "time", "offset")
    dt.date.fromisoformat(date_part)  # rejects 2024-02-30
    if time_part is None:
        time_part = "00:00:00"
    elif len(time_part) == 5:
        time_part += ":00"
    if offset and offset not in ("Z", "z"):
        moment = dt.datetime.fromisoformat(f"{date_part}T{time_part}{_colon(offset)}")
        try:
            utc = moment.astimezone(dt.UTC).replace(tzinfo=None)
        except OverflowError as exc:  # 9999-12-31T23:00-02:00 is in year 10000
            raise ValueError(f"timestamp out of range in UTC: {text!r}") from exc
        time_part = utc.isoformat(timespec="microseconds")[11:]
        date_part = utc.date().isoformat()
    if "." in time_part:
        time_part = time_part.rstrip("0").rstrip(".")
    return f"{date_part}T{time_part}", offset is not None


def _colon(offset: str) -> str:
    return offset if ":" in offset else f"{offset[:3]}:{offset[3:]}"


def parse_value(column: Column, text: str) -> Any:  # noqa: C901 - one branch per type
    """A filter value as the column stores it. Raises ValueError when it does not fit.

    Decimal values are returned as exact Decimal (not yet scaled): a filter value may
    carry more fractional digits than the column, and the comparison stays exact.
    """
    kind = column.type
    if kind is ColumnType.TEXT:
        return text
    if kind is ColumnType.INTEGER:
        if not _INTEGER_RE.fullmatch(text):
            raise ValueError(f"not an integer: {text!r}")
        value = int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"integer out of range: {text!r}")
        return value
    if kind is ColumnType.DECIMAL:
        if not _DECIMAL_RE.fullmatch(text):
            raise ValueError(f"not a decimal number: {text!r}")
        try:
            return Decimal(text)
        except InvalidOperation as exc:  # pragma: no cover - the pattern rules it out
            raise ValueError(str(exc)) from exc
    if kind is ColumnType.DATE:
        if not _DATE_RE.fullmatch(text):
            raise ValueError(f"not a date: {text!r}")
        dt.date.fromisoformat(text)
        return text
    if kind is ColumnType.TIMESTAMP:
        canonical, aware = canonical_timestamp(text)
        if aware and not column.timezone:
            raise ValueError("a timestamp with an offset cannot be compared with local times")
        return canonical
    word = _BOOLEAN_WORDS.get(text.lower())
    if word is None:
        raise ValueError(f"not a boolean: {text!r}")
    return word
