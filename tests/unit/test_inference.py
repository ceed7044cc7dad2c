"""Type inference a batch at a time: shapes, widening, scales, and the int64 range."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tally.core.columns import INT64_MAX, ColumnType
from tally.core.errors import LoadError
from tally.services.loader.inference import (
    BOOLEAN,
    DATE,
    DECIMAL,
    INTEGER,
    TEXT,
    TS_AWARE,
    TS_NAIVE,
    ColumnGuess,
    Magnitude,
    check_fits,
    first_misfit,
    fraction_digits,
    shape_of,
    timestamps_are_plain,
    values_fit,
)

# --- one batch: does it fit a shape? --------------------------------------------------------

FITS = [
    (INTEGER, ["1", "-2", "+3", "0", "", "9223372036854775808"], True),
    (INTEGER, ["007"], False),
    (INTEGER, ["-0"], True),
    (INTEGER, ["1.0"], False),
    (INTEGER, [" 1"], False),
    (INTEGER, ["1e3"], False),
    (DECIMAL, ["1", "1.5", "-0.05", "+2.25", ""], True),
    (DECIMAL, ["1.", ".5"], False),
    (DECIMAL, ["00.5"], False),
    (DECIMAL, ["1,5"], False),
    (BOOLEAN, ["true", "FALSE", "True", "fAlSe", ""], True),
    (BOOLEAN, ["yes"], False),
    (BOOLEAN, ["1"], False),
    (DATE, ["2024-01-05", "2024-02-29", ""], True),
    (DATE, ["2023-02-29"], False),
    (DATE, ["2024-02-30"], False),
    (DATE, ["2024-1-5"], False),
    (TS_NAIVE, ["2024-01-05T10:30:00", "2024-01-05 10:30", "2024-01-05", ""], True),
    (TS_NAIVE, ["2024-01-05T10:30:00.123456"], True),
    (TS_NAIVE, ["2024-01-05T10:30:00.1234567"], False),
    (TS_NAIVE, ["2024-01-05T10:30:00Z"], False),
    (TS_NAIVE, ["2024-02-30T10:30:00"], False),
    (TS_NAIVE, ["2024-01-05T24:00:00"], False),
    (
        TS_AWARE,
        ["2024-01-05T10:30:00Z", "2024-01-05 10:30+01:00", "2024-01-05T10:30:00-0130"],
        True,
    ),
    (TS_AWARE, ["2024-01-05T10:30:00"], False),
    (TS_AWARE, ["2024-01-05"], False),
    (TS_AWARE, ["9999-12-31T23:00:00-02:00"], False),  # year 10000 in UTC
    (TS_AWARE, ["0001-01-01T00:30:00+01:00"], False),  # year 0 in UTC
    (TS_AWARE, ["9999-12-31T23:00:00+02:00", "0001-01-01T00:30:00-01:00"], True),
    (TEXT, ["anything", "", "a\nb"], True),
]


@pytest.mark.parametrize(("shape", "values", "fits"), FITS)
def test_values_fit(shape: str, values: list[str], fits: bool) -> None:
    assert values_fit(shape, values) is fits
    if not fits:
        assert first_misfit(shape, values) == next(
            i for i, v in enumerate(values) if not values_fit(shape, [v])
        )


@pytest.mark.parametrize("shape", [INTEGER, DECIMAL, BOOLEAN, DATE, TS_NAIVE, TS_AWARE])
def test_a_value_with_a_newline_never_fits(shape: str) -> None:
    good = {
        INTEGER: "1",
        DECIMAL: "1.5",
        BOOLEAN: "true",
        DATE: "2024-01-05",
        TS_NAIVE: "2024-01-05T10:00:00",
        TS_AWARE: "2024-01-05T10:00:00Z",
    }[shape]
    assert values_fit(shape, [good, ""])
    assert not values_fit(shape, [good, f"{good}\n{good}"])
    assert not values_fit(shape, [good, f"{good}\r"])
    assert first_misfit(shape, [good, "", f"{good}\n{good}"]) == 2


def test_empty_values_always_fit() -> None:
    for shape in (INTEGER, DECIMAL, BOOLEAN, DATE, TS_NAIVE, TS_AWARE, TEXT):
        assert values_fit(shape, ["", "", ""])


def test_check_fits_names_the_line_and_column_of_the_first_misfit() -> None:
    check_fits(INTEGER, ["1", "", "2"], lines=[2, 3, 4], column="n")
    with pytest.raises(LoadError) as caught:
        check_fits(INTEGER, ["1", "2", "abc", "x"], lines=[2, 3, 5, 6], column="bank.amount")
    assert (caught.value.line, caught.value.column) == (5, "bank.amount")
    assert caught.value.reason == "value 'abc' is not a valid integer"
    with pytest.raises(LoadError) as caught:
        check_fits(DATE, ["2024-01-05", "2024-02-30"], lines=[2, 9], column="d")
    assert (caught.value.line, caught.value.column) == (9, "d")
    with pytest.raises(LoadError) as caught:
        check_fits(
            TS_NAIVE, ["2024-01-05T10:00:00", "2024-01-05T10:00:00Z"], lines=[2, 3], column="at"
        )
    assert caught.value.reason == "value '2024-01-05T10:00:00Z' is not a valid timestamp"
    with pytest.raises(LoadError) as caught:
        check_fits(TS_AWARE, ["2024-01-05T10:00:00"], lines=[7], column="at")
    assert caught.value.reason == (
        "value '2024-01-05T10:00:00' is not a valid timestamp with offset"
    )


@pytest.mark.parametrize(
    ("column_type", "timezone", "shape"),
    [
        (ColumnType.TIMESTAMP, True, TS_AWARE),
        (ColumnType.TIMESTAMP, False, TS_NAIVE),
        (ColumnType.INTEGER, False, INTEGER),
        (ColumnType.DECIMAL, False, DECIMAL),
        (ColumnType.DATE, False, DATE),
        (ColumnType.BOOLEAN, False, BOOLEAN),
        (ColumnType.TEXT, False, TEXT),
    ],
)
def test_shape_of(column_type: ColumnType, timezone: bool, shape: str) -> None:
    assert shape_of(column_type, timezone) == shape


# --- fractions and plain timestamps --------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "digits"),
    [
        (["1.5", "2.25"], (2, None)),
        (["1.50", "2.25", ""], (2, 2)),
        (["1.5", "2"], (1, None)),
        (["1", "2"], (0, 0)),
        (["", ""], (0, None)),
        (["-0.05"], (2, 2)),
        (["0.000000000000000001", "1.5"], (18, None)),
    ],
)
def test_fraction_digits(values: list[str], digits: tuple[int, int | None]) -> None:
    assert fraction_digits(values) == digits


@given(
    st.lists(
        st.decimals(
            min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False
        ).map(lambda d: format(d, "f")),
        min_size=1,
        max_size=20,
    ),
    st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=20),
)
def test_fraction_digits_model(values: list[str], extra: list[int]) -> None:
    # vary the number of digits per value by appending zeros or cutting the fraction
    varied = [
        v.split(".")[0] if n == 0 else f"{v}{'0' * (n - 1)}"
        for v, n in zip(values, extra * len(values), strict=False)
    ]
    lengths = [len(v.partition(".")[2]) for v in varied]
    most, uniform = fraction_digits(varied)
    assert most == max(lengths)
    assert uniform == (lengths[0] if len(set(lengths)) == 1 else None)


@pytest.mark.parametrize(
    ("values", "plain"),
    [
        (["2024-01-05T10:00:00", "2024-01-05 10:00:00", ""], True),
        (["2024-01-05T10:00:00Z", "2024-01-05 23:59:59Z"], True),
        (["", ""], True),
        (["2024-01-05T10:00"], False),
        (["2024-01-05"], False),
        (["2024-01-05T10:00:00.5"], False),
        (["2024-01-05T10:00:00+01:00"], False),
        (["2024-01-05T10:00:00z"], False),
        (["2024-01-05T10:00:00", "2024-01-05T10:00:00.000"], False),
    ],
)
def test_timestamps_are_plain(values: list[str], plain: bool) -> None:
    assert timestamps_are_plain(values) is plain


# --- a column over several batches -----------------------------------------------------------


def guess(*batches: Sequence[str]) -> ColumnGuess:
    """Observe the batches, and measure again when asked, as the loader does."""
    column = ColumnGuess()
    for batch in batches:
        column.observe(batch)
    if column.needs_measuring:
        for batch in batches:
            column.measure(batch)
    return column


T, INT, D = ColumnType.TEXT, ColumnType.INTEGER, ColumnType.DECIMAL
B, DT, TS = ColumnType.BOOLEAN, ColumnType.DATE, ColumnType.TIMESTAMP

RESOLVED = [
    ([["1", "2"], ["-3"]], (INT, 0, False)),
    ([["1", "2"], ["2.25"]], (D, 2, False)),
    ([["1.5"], ["2.25", "3"]], (D, 2, False)),
    ([["1", "2"], ["x"]], (T, 0, False)),
    ([["1.5"], ["007"]], (T, 0, False)),
    ([["007"], ["1"]], (T, 0, False)),
    ([["true"], ["FALSE", ""]], (B, 0, False)),
    ([["true"], ["1"]], (T, 0, False)),
    ([["1"], ["true"]], (T, 0, False)),
    ([["", ""], [""]], (T, 0, False)),
    ([["", ""], ["1.25"]], (D, 2, False)),
    ([["2024-01-05"], ["2024-01-06"]], (DT, 0, False)),
    ([["2024-01-05"], ["2024-01-06 10:00"]], (TS, 0, False)),
    ([["2024-01-05 10:00"], ["2024-01-06"]], (TS, 0, False)),
    ([["2024-01-05T10:00:00Z"], ["2024-01-06T10:00:00+01:00"]], (TS, 0, True)),
    ([["2024-01-05T10:00:00Z"], ["2024-01-06T10:00:00"]], (T, 0, False)),
    ([["2024-01-05T10:00:00"], ["2024-01-06T10:00:00Z"]], (T, 0, False)),
    ([["2024-01-05"], ["2024-01-06T10:00:00Z"]], (T, 0, False)),
    ([["2024-01-05"], ["1"]], (T, 0, False)),
    ([["9223372036854775807"], ["-9223372036854775807"]], (INT, 0, False)),
    ([["1"], ["9223372036854775808"]], (T, 0, False)),
    ([["92233720368547758.07"]], (D, 2, False)),
    ([["92233720368547758.08"]], (T, 0, False)),
    ([["99999999999"], ["0.0000000001"]], (T, 0, False)),
    ([["922337203"], ["0.0000000001"]], (D, 10, False)),
    ([["922337204"], ["0.0000000001"]], (T, 0, False)),
    ([["0.0000000001"], ["922337204"]], (T, 0, False)),
    ([["9.223372036854775807"], ["1"]], (D, 18, False)),
    ([["0.000000000000000001"], ["10"]], (T, 0, False)),
]


@pytest.mark.parametrize(("batches", "resolved"), RESOLVED)
def test_column_resolves(batches: list[list[str]], resolved: tuple[ColumnType, int, bool]) -> None:
    assert guess(*batches).resolve() == resolved


def test_integers_then_decimals_are_not_of_uniform_scale() -> None:
    # the first batch's integers carry no '.', so '.'-removal would store 5 for 5.00
    column = guess(["5", "6"], ["2.25", "3.50"])
    assert column.resolve() == (D, 2, False)
    assert not column.uniform_scale


def test_uniform_scale_only_when_every_value_has_it() -> None:
    assert guess(["1.50", ""], ["2.25"]).uniform_scale
    assert not guess(["1.50"], ["2.2"]).uniform_scale
    assert not guess(["1.50"], ["2"]).uniform_scale


def test_empty_values_are_noticed() -> None:
    assert not guess(["1"], ["2"]).has_empty
    assert guess(["1"], ["", "2"]).has_empty
    assert guess(["", ""]).has_empty


@pytest.mark.parametrize(
    ("batches", "plain"),
    [
        ([["2024-01-05 10:00:00"], ["2024-01-05T11:00:00"]], True),
        ([["2024-01-05"], ["2024-01-05T11:00:00"]], False),  # the dates need a time added
        ([["2024-01-05 10:00:00"], ["2024-01-05T11:00:00.5"]], False),
        ([["2024-01-05T10:00:00Z"], ["2024-01-05T11:00:00Z"]], True),
        ([["2024-01-05T10:00:00Z"], ["2024-01-05T11:00:00+00:00"]], False),
    ],
)
def test_plain_timestamps_over_batches(batches: list[list[str]], plain: bool) -> None:
    assert guess(*batches).plain_timestamps is plain


def test_measuring_again_is_asked_only_when_digits_arrive_late() -> None:
    column = ColumnGuess()
    column.observe(["99999999999", "1"])
    assert not column.needs_measuring
    column.observe(["1.25"])
    assert not column.needs_measuring  # 11 characters + 2 digits: still within int64
    column.observe(["0.0000000001"])
    assert column.needs_measuring


def test_magnitude() -> None:
    magnitude = Magnitude()
    magnitude.measure(["12", "-345", ""], 2)
    assert magnitude.largest == 0  # short values fit at this scale: not measured
    assert magnitude.settled(2)
    assert magnitude.settled(14)
    assert not magnitude.settled(15)  # 4 characters at 15 digits may leave int64
    magnitude.measure(["-92233720368547758.08", "5"], 2)
    assert magnitude.largest == Decimal("92233720368547758.08")
    assert magnitude.exceeds(2)
    assert not magnitude.exceeds(1)


# A reference model: the resolved type from the whole column at once.
_numbers = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.decimals(
        min_value=-(10**12), max_value=10**12, allow_nan=False, allow_infinity=False, places=2
    ).map(lambda d: format(d, "f")),
    st.builds(
        lambda whole, digits, fraction: f"{whole}.{str(fraction).zfill(digits)}",
        st.integers(min_value=0, max_value=10**9),
        st.integers(min_value=1, max_value=18),
        st.integers(min_value=0, max_value=9),
    ),
    st.just(""),
)


def _model(values: list[str]) -> tuple[ColumnType, int, bool]:
    filled = [v for v in values if v]
    if not filled:
        return T, 0, False
    scale = max(len(v.partition(".")[2]) for v in filled)
    if max(abs(Decimal(v)) for v in filled).scaleb(scale) > INT64_MAX:
        return T, 0, False
    return (D if scale else INT), scale, False


@given(st.lists(_numbers, min_size=1, max_size=40), st.integers(min_value=1, max_value=7))
def test_numeric_columns_match_the_model(values: list[str], batch_size: int) -> None:
    batches = [values[i : i + batch_size] for i in range(0, len(values), batch_size)]
    assert guess(*batches).resolve() == _model(values)
