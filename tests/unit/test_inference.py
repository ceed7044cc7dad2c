"""Type inference a batch at a time: shapes, widening, scales, and the int64 range."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
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
    VALUE_SEPARATOR,
    ColumnGuess,
    Magnitude,
    batch_confirmation,
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


# --- confirming a batch: proof that observing it would change nothing --------------------

_DIGITS = "0123456789"
_NUMBERS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.builds(
        lambda whole, fraction: f"{whole}.{fraction}",
        st.integers(-(10**17), 10**17),
        st.text(_DIGITS, min_size=1, max_size=4),
    ),
    st.sampled_from(["007", "-0", "+5", "1e5", "12.", ".5", "0.10"]),
)
_DAYS = st.builds(
    lambda year, month, day: f"{year:04d}-{month:02d}-{day:02d}",
    st.sampled_from([0, 1, 999, 1000, 2023, 2024, 9998, 9999]),
    st.integers(1, 13),
    st.integers(1, 32),
)
_SOME_DAYS = st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)).map(dt.date.isoformat)
_TIMESTAMPS = st.builds(
    lambda day, sep, hour, minute, second, zone: f"{day}{sep}{hour:02d}:{minute:02d}{second}{zone}",
    _DAYS,
    st.sampled_from(["T", " "]),
    st.integers(0, 24),
    st.integers(0, 59),
    st.sampled_from(["", ":00", ":59", ":07.5", ":07.1234567"]),
    st.sampled_from(["", "Z", "z", "+01:00", "-0130"]),
)
_OTHERS = st.one_of(
    st.sampled_from(["", "true", "FALSE", "yes", "a\nb"]),
    st.text(st.characters(blacklist_characters=VALUE_SEPARATOR), max_size=4),
)


# Small edits that take a value of a kind just over one of its edges.
_EDITS = st.sampled_from(
    [
        lambda v: v + "0",
        lambda v: "1" + v,
        lambda v: "-" + v,
        lambda v: v[:-1],
        lambda v: v + ".5",
        lambda v: v.replace(".", ""),
        lambda v: "",
        lambda v: v + "Z",
        lambda v: v + "+01:00",
        lambda v: v[:10],
        lambda v: v[:10] + "T00:00:00",
        lambda v: v[:16],
        lambda v: v[:5] + "02-29" + v[10:],
        lambda v: v[:8] + "31" + v[10:],
        lambda v: "9999" + v[4:],
        lambda v: "0000" + v[4:],
        lambda v: "0001-01-01" + v[10:],
        lambda v: "9999-12-31" + v[10:],
        lambda v: v[:19],
        lambda v: v[:19] + "Z",
        lambda v: v[:19] + "+01:00",
        lambda v: v[:19] + "-02:00",
        lambda v: v.lower(),
    ]
)


@st.composite
def _kind(draw: Any) -> st.SearchStrategy[str]:
    """Values of one steady kind: integers of a given size, decimals of one scale,
    days, timestamps of one form, or anything."""
    kind = draw(st.sampled_from(["integer", "decimal", "day", "timestamp", "other"]))
    if kind == "integer":
        size = 10 ** draw(st.integers(1, 19))
        return st.integers(-size, size).map(str)
    if kind == "decimal":
        scale = draw(st.integers(1, 4))
        digits = st.integers(1, scale) if draw(st.booleans()) else st.just(scale)
        return st.builds(
            lambda whole, fraction, n: f"{whole}.{fraction % 10**n:0{n}d}",
            st.integers(-(10**6), 10**6),
            st.integers(0, 10**scale - 1),
            digits,
        )
    if kind == "day":
        return _SOME_DAYS
    if kind == "timestamp":
        sep, second, zone = (
            draw(st.sampled_from(["T", " "])),
            draw(st.sampled_from(["", ":00", ":07.5"])),
            draw(st.sampled_from(["", "Z", "+01:00"])),
        )
        return st.builds(
            lambda day, hour, minute: f"{day}{sep}{hour:02d}:{minute:02d}{second}{zone}",
            _SOME_DAYS,
            st.integers(0, 23),
            st.integers(0, 59),
        )
    return _OTHERS


@st.composite
def _history_and_probes(draw: Any) -> tuple[list[list[str]], list[str]]:
    """Batches that settle a column on one kind of value (now and then another value
    slips in), and values to probe the settled guess with: more of the kind, the kind
    edited just over one of its edges, anything."""
    kind = draw(_kind())
    anything = st.one_of(_NUMBERS, _TIMESTAMPS, _OTHERS)
    edited = st.builds(lambda v, edit: edit(v), kind, _EDITS)
    # sampled_from picks evenly; one_of(kind, kind, anything) would not weigh the kind
    mostly_kind = st.sampled_from([kind] * 9 + [anything]).flatmap(lambda s: s)
    batches = draw(st.lists(st.lists(mostly_kind, min_size=1, max_size=4), min_size=1, max_size=3))
    probe = st.sampled_from([kind, edited, edited, anything]).flatmap(lambda s: s)
    return batches, draw(st.lists(probe, min_size=10, max_size=30))


def _outcome(guess: ColumnGuess) -> tuple[Any, ...]:
    """Everything the loader takes from a guess, and what later batches build on."""
    return (
        guess.resolve(),
        guess.scale,
        guess.magnitude.skipped_chars,  # what later batches are measured against
        guess.magnitude.largest,
        guess.uniform_scale,
        guess.plain_timestamps,
        guess.has_empty,
        guess.needs_measuring,
    )


@settings(max_examples=400)
@given(_history_and_probes())
def test_a_confirmed_value_would_change_no_guess(
    history_and_probes: tuple[list[list[str]], list[str]],
) -> None:
    """Every guess update is an aggregate over values (a max, an any, an all), so a
    batch whose every value is confirmed one by one is confirmed as a whole."""
    batches, probes = history_and_probes
    guess = ColumnGuess()
    for values in batches:
        guess.observe(values)
    confirmation = batch_confirmation([guess])
    for probe in probes:
        if confirmation is not None and confirmation.confirms(probe):
            observed = copy.deepcopy(guess)
            observed.observe([probe])
            assert _outcome(observed) == _outcome(guess), probe


def test_settled_batches_are_confirmed_and_changing_ones_are_not() -> None:
    """The fast path must also be taken: settled columns of the usual kinds confirm."""
    guesses = [ColumnGuess() for _ in range(7)]
    first = [
        ["1", "2024-01-31", "2024-01-31T10:00:00Z", "12.50", "EUR", "true", "2024-01-31 10:00:00"]
    ]
    for guess, values in zip(guesses, zip(*first, strict=True), strict=True):
        guess.observe(values)
    confirmation = batch_confirmation(guesses)
    assert confirmation is not None
    same = ["7", "2023-12-31", "2023-06-30 23:59:59Z", "-0.05", "", "FALSE", "2023-12-31T23:59:59"]
    assert not confirmation.confirms(VALUE_SEPARATOR.join(same + same))  # "" is new
    same[4] = "USD"
    assert confirmation.confirms(VALUE_SEPARATOR.join(same + same))
    for changed in (
        (0, "10"),  # longer than any number seen: the magnitude may move
        (1, "2024-02-29"),  # a leap day goes through the calendar check
        (2, "2024-01-31T10:00:00+01:00"),  # no longer plain
        (3, "1.5"),  # another fraction length
        (5, "yes"),
        (6, "2024-01-31T10:00:00Z"),  # not a timestamp without offset
        (6, "2024-01-31T10:00"),  # no longer plain
    ):
        row = list(same)
        row[changed[0]] = changed[1]
        assert not confirmation.confirms(VALUE_SEPARATOR.join(same + row)), changed


def test_the_calendar_edges_go_through_observe() -> None:
    """An offset can move the last days of year 9999 out of the calendar (and a value
    there makes the column text): such a value never confirms a batch."""
    guess = ColumnGuess()
    guess.observe(["2024-01-31T10:00:00+01:00"])
    confirmation = batch_confirmation([guess])
    assert confirmation is not None
    assert confirmation.confirms("2024-02-01T10:00:00-01:00")
    assert not confirmation.confirms("9999-12-31T23:00:00-02:00")  # year 10000 in UTC
    assert not confirmation.confirms("0999-01-01T00:30:00+01:00")  # year 0 in UTC
