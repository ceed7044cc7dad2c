"""The Data API query grammar (core/filters.py): names, operators, errors and their
order, and typed conditions, decimals compared exactly. Pure: no database."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tally.core.columns import INT64_MAX, INT64_MIN, Column, ColumnType
from tally.core.errors import (
    QueryNotApplicableError,
    UnknownFieldError,
    UnknownFilterFieldError,
    UnknownNameError,
    UnknownOrderingFieldError,
    UnsupportedOperatorError,
)
from tally.core.filters import MAX_PAGE_SIZE, Condition, RowQuery, parse_row_query

AMOUNT = Column("amount", "c0", ColumnType.DECIMAL, scale=2)
X = Column("x", "c1", ColumnType.INTEGER)
X_GT = Column("x__gt", "c2", ColumnType.INTEGER)  # a label that looks like a filter
A_B = Column("a__b", "c3", ColumnType.TEXT)
PAGE = Column("page", "c4", ColumnType.INTEGER)  # a label that is a reserved name
WHEN = Column("when", "c5", ColumnType.TIMESTAMP, timezone=True)
LOCAL = Column("local", "c6", ColumnType.TIMESTAMP)
FLAG = Column("flag", "c7", ColumnType.BOOLEAN)
COLUMNS = (AMOUNT, X, X_GT, A_B, PAGE, WHEN, LOCAL, FLAG)


def parse(
    filters: Sequence[tuple[str, str]] = (),
    *,
    fields: str | None = None,
    ordering: str | None = None,
    page: int = 1,
    page_size: int = 100,
) -> RowQuery:
    return parse_row_query(
        COLUMNS, filters, fields=fields, ordering=ordering, page=page, page_size=page_size
    )


def condition(key: str, value: str) -> Condition:
    (only,) = parse([(key, value)]).conditions
    return only


# --- names and operators -------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "column", "op"),
    [
        ("x", X, "eq"),
        ("x__exact", X, "eq"),
        ("x__gte", X, "gte"),
        ("x__gt", X_GT, "eq"),  # the exact label wins over `x` + `gt`
        ("x__gt__gt", X_GT, "gt"),
        ("x__gt__exact", X_GT, "eq"),
        ("a__b", A_B, "eq"),
        ("a__b__lt", A_B, "lt"),
        ("a__b__in", A_B, "in"),
        ("page__gt", PAGE, "gt"),  # only the bare reserved name is reserved
    ],
)
def test_filter_keys_resolve_to_a_column_and_an_operator(key: str, column: Column, op: str) -> None:
    found = condition(key, "1")
    assert (found.column, found.op) == (column, op)


def test_reserved_names_are_never_filters_even_when_a_column_has_that_name() -> None:
    reserved = [
        ("page", "3"),
        ("page_size", "1"),
        ("fields", "x"),
        ("ordering", "x"),
        ("workspace_id", "7"),
    ]
    query = parse(reserved)
    assert query.conditions == ()


@pytest.mark.parametrize(
    ("key", "error", "name"),
    [
        ("x__foo", UnsupportedOperatorError, "foo"),  # known column: the operator is wrong
        ("x__GT", UnsupportedOperatorError, "GT"),  # operators are case-sensitive
        ("x__", UnsupportedOperatorError, ""),
        ("a__b__like", UnsupportedOperatorError, "like"),
        ("nope__foo", UnknownFilterFieldError, "nope__foo"),  # neither known: the key
        ("nope__gt", UnknownFilterFieldError, "nope"),  # known operator: the column
        ("nope", UnknownFilterFieldError, "nope"),
        ("X", UnknownFilterFieldError, "X"),  # column names are case-sensitive
        ("a", UnknownFilterFieldError, "a"),
    ],
)
def test_unknown_operator_and_unknown_field_are_told_apart(
    key: str, error: type[UnknownNameError], name: str
) -> None:
    with pytest.raises(error) as raised:
        parse([(key, "1")])
    assert type(raised.value) is error
    assert raised.value.name == name


@pytest.mark.parametrize(
    ("filters", "fields", "ordering", "error"),
    [
        # filter names and operators first, whatever their position...
        ([("amount", "abc"), ("nope", "1")], "nope", "nope", UnknownFilterFieldError),
        ([("amount", "abc"), ("x__foo", "1")], "nope", "nope", UnsupportedOperatorError),
        # ...then fields, then ordering, then values
        ([("amount", "abc")], "x,nope", "nope", UnknownFieldError),
        ([("amount", "abc")], "x", "-nope", UnknownOrderingFieldError),
        ([("amount", "abc")], "x", "-x", QueryNotApplicableError),
    ],
)
def test_errors_come_in_the_spec_order(
    filters: list[tuple[str, str]], fields: str, ordering: str, error: type[Exception]
) -> None:
    with pytest.raises(error) as raised:
        parse(filters, fields=fields, ordering=ordering)
    assert type(raised.value) is error


def test_unknown_ordering_names_the_column_without_its_minus() -> None:
    with pytest.raises(UnknownOrderingFieldError) as raised:
        parse(ordering="-nope")
    assert raised.value.name == "nope"


# --- fields, ordering, paging ----------------------------------------------------------


def test_fields_keep_the_requested_order_once_each() -> None:
    assert parse(fields="x,amount,x").fields == (X, AMOUNT)
    assert parse(fields=None).fields == COLUMNS
    assert parse(fields="").fields == COLUMNS


def test_ordering_reads_a_minus_as_descending() -> None:
    descending = parse(ordering="-amount").ordering
    assert (descending.column, descending.descending) == (AMOUNT, True)
    ascending = parse(ordering="x__gt").ordering
    assert (ascending.column, ascending.descending) == (X_GT, False)
    assert parse(ordering=None).ordering.column is None
    assert parse(ordering="").ordering.column is None


def test_page_size_is_capped_and_offset_follows_the_page() -> None:
    query = parse(page=3, page_size=20000)
    assert query.page_size == MAX_PAGE_SIZE
    assert query.offset == 2 * MAX_PAGE_SIZE
    assert parse(page=4, page_size=25).offset == 75


# --- typed values ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "op", "values"),
    [
        ("amount__gt", "10.005", "gt", (1000,)),  # v > 10.005  <=>  v > 10.00
        ("amount__gte", "10.005", "gte", (1001,)),  # v >= 10.005 <=>  v >= 10.01
        ("amount__lt", "10.005", "lt", (1001,)),  # v < 10.005  <=>  v < 10.01
        ("amount__lte", "10.005", "lte", (1000,)),  # v <= 10.005 <=>  v <= 10.00
        ("amount__gt", "-10.005", "gt", (-1001,)),
        ("amount__gte", "-10.005", "gte", (-1000,)),
        ("amount__lt", "-10.005", "lt", (-1000,)),
        ("amount__lte", "-10.005", "lte", (-1001,)),
        ("amount__gt", "10.01", "gt", (1001,)),
        ("amount__lte", "+10", "lte", (1000,)),
        ("amount", "10.5", "eq", (1050,)),
        ("amount", "10.50000", "eq", (1050,)),
        ("amount", "-0.00", "eq", (0,)),
        ("amount", "10.005", "never", ()),  # no stored value has three digits
        ("amount__in", "10.005,10.5,10.50,7", "in", (1050, 700)),
        ("amount__in", "10.005", "never", ()),
        ("amount__in", "10.005,", "in_or_null", ()),
    ],
)
def test_decimal_values_compare_exactly_at_the_columns_scale(
    key: str, value: str, op: str, values: tuple[int, ...]
) -> None:
    found = condition(key, value)
    assert (found.op, found.values) == (op, values)


TINY = "0" * 30 + "1"  # more digits than Decimal's default 28-digit precision keeps
NINES = "9" * 30


@pytest.mark.parametrize(
    ("key", "value", "op", "values"),
    [
        ("amount", "12.50" + TINY, "never", ()),
        ("amount__in", f"12.50{TINY},12.49{NINES}", "never", ()),
        ("amount__gt", "12.49" + NINES, "gt", (1249,)),
        ("amount__lte", "12.49" + NINES, "lte", (1249,)),
        ("amount__gte", "12.50" + TINY, "gte", (1251,)),
        ("amount__lt", "12.50" + TINY, "lt", (1251,)),
        ("amount__gt", "92233720368547758.07" + TINY, "gt", (INT64_MAX,)),
        ("amount__gte", "92233720368547758.07" + TINY, "never", ()),
    ],
)
def test_decimal_values_with_many_digits_are_not_rounded(
    key: str, value: str, op: str, values: tuple[int, ...]
) -> None:
    found = condition(key, value)
    assert (found.op, found.values) == (op, values)


BEYOND = "100000000000000000000"  # 10**20: at scale 2, past any 64-bit stored value


@pytest.mark.parametrize(
    ("key", "value", "op", "values"),
    [
        ("amount", BEYOND, "never", ()),
        ("amount__gt", BEYOND, "never", ()),
        ("amount__gte", BEYOND, "never", ()),
        ("amount__lt", BEYOND, "is_not_null", ()),
        ("amount__lte", BEYOND, "is_not_null", ()),
        ("amount", "-" + BEYOND, "never", ()),
        ("amount__gt", "-" + BEYOND, "is_not_null", ()),
        ("amount__gte", "-" + BEYOND, "is_not_null", ()),
        ("amount__lt", "-" + BEYOND, "never", ()),
        ("amount__lte", "-" + BEYOND, "never", ()),
        ("amount__in", f"{BEYOND},1", "in", (100,)),
        ("amount__in", BEYOND, "never", ()),
        ("amount__in", f"{BEYOND},", "in_or_null", ()),
        # the edges of the stored range, 64-bit integers at scale 2
        ("amount", "92233720368547758.07", "eq", (INT64_MAX,)),
        ("amount", "92233720368547758.08", "never", ()),
        ("amount__lte", "92233720368547758.08", "is_not_null", ()),
        ("amount__lte", "92233720368547758.07", "lte", (INT64_MAX,)),
        ("amount__gte", "92233720368547758.071", "never", ()),
        ("amount__lt", "92233720368547758.071", "is_not_null", ()),
        ("amount", "-92233720368547758.08", "eq", (INT64_MIN,)),
        ("amount", "-92233720368547758.09", "never", ()),
        ("amount__lte", "-92233720368547758.081", "never", ()),
        ("amount__gt", "-92233720368547758.081", "is_not_null", ()),
    ],
)
def test_decimal_values_beyond_64_bits_match_nothing_or_everything_present(
    key: str, value: str, op: str, values: tuple[int, ...]
) -> None:
    found = condition(key, value)
    assert (found.op, found.values) == (op, values)


@pytest.mark.parametrize(
    ("key", "value", "op", "values"),
    [
        ("x", "", "is_null", ()),
        ("x__exact", "", "is_null", ()),
        ("a__b", "", "is_null", ()),
        ("x__in", ",5", "in_or_null", (5,)),
        ("x__in", "", "in_or_null", ()),
        ("x__in", "5,5,+5", "in", (5,)),
        ("a__b__in", "p,,q", "in_or_null", ("p", "q")),
        ("flag", "TRUE", "eq", (True,)),
        ("flag__in", "true,false,True", "in", (True, False)),
        ("when", "2024-01-01T10:00:00+02:00", "eq", ("2024-01-01T08:00:00",)),
        ("when__gt", "2024-01-01T10:00:00.500Z", "gt", ("2024-01-01T10:00:00.5",)),
        ("local__lt", "2024-01-01 10:00", "lt", ("2024-01-01T10:00:00",)),
        ("local", "2024-01-01", "eq", ("2024-01-01T00:00:00",)),
        ("a__b__gte", "Été", "gte", ("Été",)),
    ],
)
def test_values_take_the_columns_stored_form(
    key: str, value: str, op: str, values: tuple[object, ...]
) -> None:
    found = condition(key, value)
    assert (found.op, found.values) == (op, values)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("x__gte", ""),  # a missing value has no order
        ("amount__lte", ""),
        ("x", "1.5"),
        ("x", "007"),
        ("x__in", "1,two"),
        ("amount", "1e3"),
        ("amount", ".5"),
        ("amount__in", "1,x"),
        ("local", "2024-01-01T10:00:00Z"),  # an offset against local times
        ("when", "2024-02-30T10:00:00Z"),
        ("when", "2024-01-01T24:00:00Z"),
        ("flag", "maybe"),
    ],
)
def test_values_that_do_not_fit_the_column_cannot_be_applied(key: str, value: str) -> None:
    with pytest.raises(QueryNotApplicableError):
        parse([(key, value)])


# --- cache keys --------------------------------------------------------------------------


def test_cache_key_ignores_filter_order_and_in_list_order() -> None:
    one = parse([("x__gt", "1"), ("amount__in", "1,2"), ("a__b", "p")])
    other = parse([("a__b", "p"), ("amount__in", "2,1"), ("x__gt", "1")])
    assert one.cache_key() == other.cache_key()
    assert one.count_key() == other.count_key()


def test_cache_key_tells_different_requests_apart() -> None:
    base = parse([("x__gt", "1")], fields="x", ordering="x", page=1, page_size=10)
    variants = [
        parse([("x__gt", "2")], fields="x", ordering="x", page=1, page_size=10),
        parse([("x__gte", "1")], fields="x", ordering="x", page=1, page_size=10),
        parse([("x__gt__gt", "1")], fields="x", ordering="x", page=1, page_size=10),
        parse([("x__gt", "1")], fields="x,amount", ordering="x", page=1, page_size=10),
        parse([("x__gt", "1")], fields="x", ordering="-x", page=1, page_size=10),
        parse([("x__gt", "1")], fields="x", ordering="x", page=2, page_size=10),
        parse([("x__gt", "1")], fields="x", ordering="x", page=1, page_size=11),
    ]
    keys = {base.cache_key(), *(v.cache_key() for v in variants)}
    assert len(keys) == 1 + len(variants)
    # the count depends on the filters only
    assert variants[3].count_key() == base.count_key()
    assert variants[0].count_key() != base.count_key()


def test_equal_meanings_share_a_cache_key() -> None:
    assert parse([("amount", "10.5")]).cache_key() == parse([("amount", "10.50")]).cache_key()
    assert parse([("x", "+5")]).cache_key() == parse([("x__exact", "5")]).cache_key()
