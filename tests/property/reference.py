"""A plain reference model of the Data API's row semantics, for the property tests.

Written from the documented rules only, never from tally's code: values are plain
Python objects (int, exact Decimal, date, datetime, bool, str), filters are Python
comparisons, ordering is a stable sort, paging is a slice. Slow and obviously right.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from typing import Any

INT64 = 2**63
RESERVED = frozenset({"page", "page_size", "fields", "ordering", "workspace_id"})
OPERATORS = {"exact": "eq", "gt": "gt", "gte": "gte", "lt": "lt", "lte": "lte", "in": "in"}
MAX_PAGE_SIZE = 10000

_INTEGER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?"
    r"(Z|z|[+-][0-9]{2}:?[0-9]{2})?)?"
)


class RefRejectedError(Exception):
    """The request is invalid: tally must answer 400 (a value that does not fit)."""


class RefUnmodelledError(Exception):
    """The request uses a behaviour the documented rules do not settle: not compared."""


@dataclass(frozen=True)
class RefColumn:
    name: str
    type: str  # integer, decimal, date, timestamp, boolean, text
    scale: int = 0  # decimal: fractional digits kept
    timezone: bool = False  # timestamp: values carried an offset (rendered with Z)


# --- values ------------------------------------------------------------------------


def _timestamp(text: str) -> tuple[dt.datetime, bool]:
    """ISO 8601 text -> (naive datetime, in UTC when the text had an offset; had offset)."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        raise RefRejectedError(text)
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    try:
        moment = dt.datetime(  # noqa: DTZ001 - naive on purpose: UTC once offsets are applied
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "").ljust(6, "0")),
        )
    except ValueError as exc:
        raise RefRejectedError(text) from exc
    if offset is None:
        return moment, False
    if offset in ("Z", "z"):
        return moment, True
    digits = offset[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        raise RefRejectedError(text)
    shift = dt.timedelta(hours=hours, minutes=minutes)
    return (moment - shift if offset[0] == "+" else moment + shift), True


def cell_value(column: RefColumn, text: str) -> Any:
    """The value a CSV cell holds ('' is a missing value)."""
    if text == "":
        return None
    kind = column.type
    if kind == "integer":
        return int(text)
    if kind == "decimal":
        return Decimal(text)
    if kind == "date":
        return dt.date.fromisoformat(text)
    if kind == "timestamp":
        return _timestamp(text)[0]
    if kind == "boolean":
        return {"true": True, "false": False}[text.lower()]
    return text


def _integer_filter(column: RefColumn, text: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise RefRejectedError(text)
    value = int(text)
    if not -INT64 <= value < INT64:
        raise RefUnmodelledError("an integer filter beyond 64 bits")
    return value


def _decimal_filter(column: RefColumn, text: str) -> Decimal:
    if not _DECIMAL.fullmatch(text):
        raise RefRejectedError(text)
    return Decimal(text)  # exact: Decimal(str) never rounds


def _date_filter(column: RefColumn, text: str) -> dt.date:
    match = _DATE.fullmatch(text)
    if match is None:
        raise RefRejectedError(text)
    try:
        return dt.date(*map(int, match.groups()))
    except ValueError as exc:
        raise RefRejectedError(text) from exc


def _timestamp_filter(column: RefColumn, text: str) -> dt.datetime:
    moment, aware = _timestamp(text)
    if aware and not column.timezone:
        raise RefRejectedError("an offset compared with local times")
    if column.timezone and not aware:
        raise RefUnmodelledError("a local time compared with UTC times")
    return moment


def _boolean_filter(column: RefColumn, text: str) -> bool:
    word = text.lower()
    if word in ("true", "false"):
        return word == "true"
    if word in ("1", "0", "t", "f", "yes", "no"):
        raise RefUnmodelledError("boolean words other than true/false")
    raise RefRejectedError(text)


_FILTER_VALUES: dict[str, Callable[[RefColumn, str], Any]] = {
    "text": lambda _column, text: text,
    "integer": _integer_filter,
    "decimal": _decimal_filter,
    "date": _date_filter,
    "timestamp": _timestamp_filter,
    "boolean": _boolean_filter,
}


def filter_value(column: RefColumn, text: str) -> Any:
    """A filter's text as a value comparable with the column's values."""
    return _FILTER_VALUES[column.type](column, text)


def json_value(column: RefColumn, value: Any) -> Any:
    """How the API renders a value: decimals with exactly `scale` digits, timestamps in
    ISO form (with Z for columns whose values carried an offset), dates as ISO text."""
    if value is None:
        return None
    kind = column.type
    if kind == "decimal":
        units = int(value * 10**column.scale)  # exact: the cell had at most `scale` digits
        sign = "-" if units < 0 else ""
        whole, fraction = divmod(abs(units), 10**column.scale)
        return Decimal(f"{sign}{whole}.{str(fraction).zfill(column.scale)}")
    if kind == "date":
        return value.isoformat()
    if kind == "timestamp":
        text = value.strftime("%Y-%m-%dT%H:%M:%S")
        if value.microsecond:
            text += f".{value.microsecond:06d}".rstrip("0")
        return text + ("Z" if column.timezone else "")
    return value


# --- queries -----------------------------------------------------------------------


ROW = RefColumn("_row", "integer")  # the system column every resource has


@dataclass(frozen=True)
class RefTable:
    columns: tuple[RefColumn, ...]
    rows: tuple[tuple[Any, ...], ...]  # typed values, in insertion order
    # The last `system` columns are system columns (`_row`): named in fields, filters and
    # ordering like any column, never among the default fields; a column of the table's
    # own with the same name keeps the name.
    system: int = 0

    def with_row_ids(self, ids: Sequence[int]) -> RefTable:
        """The table with `_row`: `ids`, which the documented rule makes unique and
        increasing in insertion order (checked here), are its values."""
        if any(a >= b for a, b in pairwise(ids)) or len(ids) != len(self.rows):
            raise AssertionError(f"_row is not unique and increasing: {ids}")
        rows = tuple((*row, i) for row, i in zip(self.rows, ids, strict=True))
        return RefTable((*self.columns, ROW), rows, self.system + 1)

    def names(self) -> dict[str, int]:
        """Column index by name: the table's own columns win over system columns."""
        own = len(self.columns) - self.system
        system = {c.name: own + i for i, c in enumerate(self.columns[own:])}
        return system | {c.name: i for i, c in enumerate(self.columns[:own])}

    @classmethod
    def from_cells(cls, columns: Sequence[RefColumn], cells: Iterable[Sequence[str]]) -> RefTable:
        return cls(
            tuple(columns),
            tuple(
                tuple(cell_value(c, t) for c, t in zip(columns, row, strict=True)) for row in cells
            ),
        )


Predicate = Callable[[Any], bool]


def _resolve(names: dict[str, int], key: str) -> tuple[int, str]:
    """The column index and operator a filter key names; the exact name wins."""
    if key in names:
        return names[key], "eq"
    name, sep, suffix = key.rpartition("__")
    if sep and name in names and suffix in OPERATORS:
        return names[name], OPERATORS[suffix]
    raise RefRejectedError(f"unknown filter {key!r}")


def _predicate(column: RefColumn, op: str, text: str) -> Predicate:
    if op == "in":
        items = text.split(",")
        wanted = [filter_value(column, t) for t in items if t != ""]
        with_missing = "" in items
        return lambda v: (with_missing and v is None) or (v is not None and v in wanted)
    if text == "":
        if op != "eq":
            raise RefRejectedError("an empty value has no order")
        return lambda v: v is None
    x = filter_value(column, text)
    compare: dict[str, Predicate] = {
        "eq": lambda v: v == x,
        "gt": lambda v: v > x,
        "gte": lambda v: v >= x,
        "lt": lambda v: v < x,
        "lte": lambda v: v <= x,
    }
    return lambda v: v is not None and compare[op](v)


def _fields(table: RefTable, names: dict[str, int], fields: str | None) -> list[int]:
    if not fields:
        return list(range(len(table.columns) - table.system))
    chosen: list[int] = []
    for name in fields.split(","):
        if name not in names:
            raise RefRejectedError(f"unknown field {name!r}")
        if names[name] not in chosen:
            chosen.append(names[name])
    return chosen


def _sorted(table: RefTable, rows: list[int], ordering: str | None) -> list[int]:
    """Missing is the smallest value; ties keep insertion order in the same direction."""
    if not ordering:
        return rows
    descending = ordering.startswith("-")
    name = ordering[1:] if descending else ordering
    names = table.names()
    if name not in names:
        raise RefRejectedError(f"unknown ordering {name!r}")
    index = names[name]

    def key(row: int) -> tuple[Any, ...]:
        value = table.rows[row][index]
        return ((0,) if value is None else (1, value)), row

    return sorted(rows, key=key, reverse=descending)


def run_query(
    table: RefTable,
    filters: Sequence[tuple[str, str]],
    *,
    fields: str | None,
    ordering: str | None,
    page: int,
    page_size: int,
) -> dict[str, Any]:
    """The response envelope tally must give, or RefRejectedError / RefUnmodelledError."""
    names = table.names()
    resolved = [(*_resolve(names, k), v) for k, v in filters if k not in RESERVED]
    chosen = _fields(table, names, fields)
    predicates = [(i, _predicate(table.columns[i], op, v)) for i, op, v in resolved]
    matching = [r for r, row in enumerate(table.rows) if all(p(row[i]) for i, p in predicates)]
    ordered = _sorted(table, matching, ordering)
    size = min(page_size, MAX_PAGE_SIZE)
    window = ordered[(page - 1) * size : page * size]
    data = [
        {table.columns[i].name: json_value(table.columns[i], table.rows[r][i]) for i in chosen}
        for r in window
    ]
    return {
        "data": data,
        "meta": {
            "page": page,
            "page_size": size,
            "returned_count": len(data),
            "total_count": len(matching),
            "total_pages": math.ceil(len(matching) / size),
        },
    }
