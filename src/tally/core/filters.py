"""The Data API query grammar: reserved parameters, filter operators, ordering, fields.

Pure code: turns query-string pairs and a resource's columns into a `RowQuery`, or
raises the spec's errors in the spec's order (filter names and operators, then
fields, then ordering, then values). Values are converted to the column's stored
form here, so storage only ever sees typed, comparable values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any

from tally.core.columns import (
    INT64_MAX,
    INT64_MIN,
    ROW_COLUMN,
    Column,
    ColumnType,
    parse_value,
)
from tally.core.errors import (
    QueryNotApplicableError,
    UnknownFieldError,
    UnknownFilterFieldError,
    UnknownOrderingFieldError,
    UnsupportedOperatorError,
)

RESERVED_PARAMETERS = frozenset({"page", "page_size", "fields", "ordering"})
# `workspace_id` belongs in a header; in the query string it is never a filter.
NEVER_FILTERS = RESERVED_PARAMETERS | {"workspace_id"}
OPERATOR_SEPARATOR = "__"


class Operator(StrEnum):
    """What a condition asks of a column: the query string's operators, and the forms
    the parser rewrites them to (a missing value, an impossible or always-true bound)."""

    EQ = "eq"
    IN = "in"
    IN_OR_NULL = "in_or_null"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    IS_NULL = "is_null"
    IS_NOT_NULL = "is_not_null"
    NEVER = "never"
    # Internal: a text column's value contains the text, case-insensitively (the
    # console's reference search, `contains`). No query-string suffix names it, so the
    # Data API's parser never makes one and `?col__contains=x` stays the spec's 400.
    CONTAINS = "contains"


# Query-string suffix -> operator.
OPERATORS = {
    "exact": Operator.EQ,
    "gt": Operator.GT,
    "gte": Operator.GTE,
    "lt": Operator.LT,
    "lte": Operator.LTE,
    "in": Operator.IN,
}
DEFAULT_PAGE_SIZE = 1000
MAX_PAGE_SIZE = 10000


@dataclass(frozen=True)
class Condition:
    """One typed condition on one column."""

    column: Column
    op: Operator
    values: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Ordering:
    column: Column | None  # None: insertion order (the hidden row id)
    descending: bool = False


@dataclass(frozen=True)
class RowQuery:
    """A validated Data API request, ready for storage."""

    conditions: tuple[Condition, ...]
    fields: tuple[Column, ...]
    ordering: Ordering
    page: int
    page_size: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.page_size

    def cache_key(self) -> tuple[Any, ...]:
        """Identical requests give equal keys, whatever the filter order in the URL."""
        conditions = sorted(
            (c.column.physical, c.op, tuple(sorted(map(repr, c.values)))) for c in self.conditions
        )
        return (
            tuple(conditions),
            tuple(c.physical for c in self.fields),
            self.ordering.column.physical if self.ordering.column else None,
            self.ordering.descending,
            self.page,
            self.page_size,
        )

    def count_key(self) -> tuple[Any, ...]:
        conditions: tuple[Any, ...] = self.cache_key()[0]
        return conditions

    def with_condition(self, condition: Condition) -> RowQuery:
        return replace(self, conditions=(*self.conditions, condition))

    def searches_text(self) -> bool:
        """Does a condition search within text (which only SQL answers, not a column
        snapshot)?"""
        return any(c.op is Operator.CONTAINS for c in self.conditions)


def cap_page_size(page_size: int) -> int:
    return min(page_size, MAX_PAGE_SIZE)


def parse_row_query(
    columns: Sequence[Column],
    filters: Iterable[tuple[str, str]],
    *,
    fields: str | None,
    ordering: str | None,
    page: int,
    page_size: int,
    system: Sequence[Column] = (),
) -> RowQuery:
    """Validate the request against the resource's columns; raise the first spec error.

    `system`: the resource's system columns (`core.columns.system_columns`), named like
    any column but not among the default fields; a column of the resource's own with
    the same label keeps the name. Ordering by `_row` is insertion order itself."""
    by_name = {c.name: c for c in system} | {c.name: c for c in columns}
    raw = [
        _resolve_filter(by_name, key, value) for key, value in filters if key not in NEVER_FILTERS
    ]
    chosen = _resolve_fields(by_name, columns, fields)
    order = _resolve_ordering(by_name, ordering)
    conditions = tuple(_typed_condition(column, op, value) for column, op, value in raw)
    return RowQuery(conditions, chosen, order, page, cap_page_size(page_size))


def contains_condition(column: Column, text: str) -> Condition:
    """`column` contains `text` (case-insensitively: see storage's `text_search`) when
    the column holds text; a column of any other type (an integer invoice number) is
    compared as the Data API's equal-to compares it, `text` read as its type (never
    its stored form, which for a decimal or a timestamp is no text anybody typed)."""
    if column.type is ColumnType.TEXT:
        return Condition(column, Operator.CONTAINS, (text,))
    return _typed_condition(column, Operator.EQ, text)


def _resolve_filter(
    by_name: dict[str, Column], key: str, value: str
) -> tuple[Column, Operator, str]:
    if key in by_name:
        return by_name[key], Operator.EQ, value
    name, sep, suffix = key.rpartition(OPERATOR_SEPARATOR)
    if not sep:
        raise UnknownFilterFieldError(key)
    if suffix not in OPERATORS:
        if name in by_name:
            raise UnsupportedOperatorError(suffix)
        raise UnknownFilterFieldError(key)
    if name not in by_name:
        raise UnknownFilterFieldError(name)
    return by_name[name], OPERATORS[suffix], value


def _resolve_fields(
    by_name: dict[str, Column], columns: Sequence[Column], fields: str | None
) -> tuple[Column, ...]:
    if not fields:
        return tuple(columns)
    chosen: dict[str, Column] = {}
    for name in fields.split(","):
        if name not in by_name:
            raise UnknownFieldError(name)
        chosen.setdefault(name, by_name[name])
    return tuple(chosen.values())


def _resolve_ordering(by_name: dict[str, Column], ordering: str | None) -> Ordering:
    if not ordering:
        return Ordering(None)
    descending = ordering.startswith("-")
    name = ordering[1:] if descending else ordering
    if name not in by_name:
        raise UnknownOrderingFieldError(name)
    if by_name[name] == ROW_COLUMN:
        return Ordering(None, descending)  # the row id: one order, one cache entry
    return Ordering(by_name[name], descending)


def _typed_condition(column: Column, op: Operator, text: str) -> Condition:
    try:
        if op == Operator.IN:
            return _membership(column, text.split(","))
        if text == "":
            if op == Operator.EQ:
                return Condition(column, Operator.IS_NULL)
            raise ValueError("an empty value has no order")
        value = parse_value(column, text)
    except ValueError as exc:
        raise QueryNotApplicableError(f"{column.name}: {exc}") from exc
    if column.type is ColumnType.DECIMAL:
        return _decimal_condition(column, op, value)
    return Condition(column, op, (value,))


def _membership(column: Column, texts: list[str]) -> Condition:
    has_null = "" in texts
    values = [parse_value(column, t) for t in texts if t != ""]
    if column.type is ColumnType.DECIMAL:
        scaled = (_scaled(column, v) for v in values)
        values = [s for s in scaled if s is not None]
    unique = tuple(dict.fromkeys(values))
    if has_null:
        return Condition(column, Operator.IN_OR_NULL, unique)
    return Condition(column, Operator.IN, unique) if unique else Condition(column, Operator.NEVER)


def _shifted(value: Decimal, scale: int) -> Decimal:
    """value * 10**scale, exactly: Decimal arithmetic would round to 28 digits, and
    '12.50000000000000000000000000001' must not equal 12.50."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # the pattern admits finite numbers only
    return Decimal((sign, digits, exponent + scale))


def _scaled(column: Column, value: Decimal) -> int | None:
    """The stored integer equal to `value`, or None when no stored value can equal it."""
    exact = _shifted(value, column.scale)
    if exact != exact.to_integral_value() or not INT64_MIN <= exact <= INT64_MAX:
        return None
    return int(exact)


def _decimal_condition(column: Column, op: Operator, value: Decimal) -> Condition:
    """Compare exactly, even when the value has more digits than the column keeps."""
    if op == Operator.EQ:
        scaled = _scaled(column, value)
        return (
            Condition(column, Operator.EQ, (scaled,))
            if scaled is not None
            else Condition(column, Operator.NEVER)
        )
    exact = _shifted(value, column.scale)
    # v > x  <=>  v > floor(x);  v >= x  <=>  v >= ceil(x)  (v an integer)
    bound = math.floor(exact) if op in (Operator.GT, Operator.LTE) else math.ceil(exact)
    if bound > INT64_MAX:
        return (
            Condition(column, Operator.NEVER)
            if op in (Operator.GT, Operator.GTE)
            else Condition(column, Operator.IS_NOT_NULL)
        )
    if bound < INT64_MIN:
        return (
            Condition(column, Operator.IS_NOT_NULL)
            if op in (Operator.GT, Operator.GTE)
            else Condition(column, Operator.NEVER)
        )
    return Condition(column, op, (bound,))
