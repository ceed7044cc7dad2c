"""The matching engine against the plain model of the rules, on random small inputs, and
its independence of input order (issue #11: "never which row arrived first"); with
currencies on both sides or none (issue #32, point 4)."""

from __future__ import annotations

import random
from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from support.reconciliation_cases import (
    SCALE,
    as_model,
    content,
    definition,
    model,
    run_engine,
    run_model,
    side_rows,
)
from tally.core.reconciliation import (
    ManualMatch,
    ManualWork,
    MatchStatus,
    Rejection,
    Resolution,
    SideName,
)
from tally.services.reconciliation import key_join, totals
from tally.services.reconciliation import passes as pass_module
from tally.services.reconciliation.matching import SideTable, output_rows, reconcile

# Few distinct values, so that keys collide, sums fit and ties happen; the rarer ones test
# the normalisers and empty values.
KEYS = st.one_of(
    st.sampled_from(["A", "B"]),
    st.sampled_from(["a", " A", "A ", "007", "7", "000", "0", "x-1", "x  1", "", None]),
)
# Two currencies mostly (amounts often coincide across them), spelt loosely at times, and
# an empty one.
CURRENCIES = st.one_of(
    st.sampled_from(["USD", "EUR"]), st.sampled_from([" usd", "Eur ", " ", None])
)
NORMALIZERS = [
    "trim",
    "casefold",
    "collapse_spaces",
    "strip_leading_zeros",
    "alnum_only",
    "digits_only",
]

STEPS = st.one_of(  # mostly none or the usual pair; sometimes any, in any order
    st.just([]),
    st.just(["trim", "casefold"]),
    st.lists(st.sampled_from(NORMALIZERS), max_size=3),
)

rows = st.lists(
    st.fixed_dictionaries(
        {
            "ref": KEYS,
            "code": st.sampled_from(["c", "c", "C", None]),
            "amount": st.one_of(st.integers(0, 3), st.integers(-3, 3), st.none()),
            "day": st.one_of(st.integers(0, 1), st.integers(0, 3), st.none()),
            "note": st.integers(0, 1),
            "cur": CURRENCIES,
        }
    ),
    min_size=1,  # empty sides: tests/unit/reconciliation
    max_size=7,
)


@st.composite
def passes(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for index in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["one_to_one", "one_to_many", "many_to_one"]))
        columns = draw(
            st.sampled_from(
                [[], ["ref"], ["ref", "code"]]
                if kind == "one_to_one"
                else [["ref"], ["ref", "code"]]
            )
        )
        keys = [
            {
                "left": c,
                "right": c,
                "normalize": draw(STEPS),
            }
            for c in columns
        ]
        out.append(
            {
                "name": f"p{index}",
                "type": kind,
                "keys": keys,
                "amount_tolerance": draw(st.sampled_from(["0", "0.01", "0.02"])),
                "date_window": draw(st.sampled_from([[0, 0], [-1, 1], [0, 2], [-2, 0]])),
                "auto_confirm": draw(st.booleans()),
            }
        )
    return out


@st.composite
def manual_work(draw: st.DrawFn, left_count: int, right_count: int) -> ManualWork:
    lefts = list(range(1, left_count + 1))
    rights = list(range(1, right_count + 1))
    random.Random(draw(st.integers(0, 1000))).shuffle(lefts)
    matches = []
    if lefts and rights and draw(st.booleans()):
        matches.append(ManualMatch(0, tuple(lefts[:1]), tuple(rights[-2:]), "checked"))
    rejections = [
        Rejection((draw(st.sampled_from(lefts)),), (draw(st.sampled_from(rights)),))
        for _ in range(draw(st.integers(0, 2)))
        if lefts and rights
    ]
    # resolutions of either side, at times on a row a manual match also names (the
    # match keeps it) and at times naming a row twice over two resolutions
    resolutions = [
        Resolution(
            side,
            tuple(sorted(set(draw(st.lists(st.sampled_from(rows), min_size=1, max_size=2))))),
            "bank_fee",
        )
        for side, rows in ((SideName.LEFT, lefts), (SideName.RIGHT, rights))
        for _ in range(draw(st.integers(0, 2)))
        if rows
    ]
    return ManualWork(tuple(matches), tuple(rejections), tuple(resolutions))


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, ...]:
    with_amount, with_date = draw(st.booleans()), draw(st.booleans())
    d = definition(draw(passes()), amount=with_amount, date=with_date, currency=draw(st.booleans()))
    left, right = draw(rows), draw(rows)
    for r in left + right:
        r["ref"] = r["ref"] or None  # the Data API's text form has no empty string
    return d, left, right, draw(manual_work(len(left), len(right)))


def plain_output_rows(outcome: Any, left_count: int) -> list[tuple[Any, ...]]:
    """The output's rows as the issue lays them out, from the `Match` objects: the plain
    model of `output_rows`, which builds them from the engine's arrays."""
    by_left = {p: m for m in outcome.matches for p in m.left}
    rows: list[tuple[Any, ...]] = []
    for position in range(1, left_count + 1):
        m = by_left.get(position)
        if m is None:
            status, reason = one_sided(outcome, SideName.LEFT, position)
            rows.append((None, status, None, None, reason, position, None))
            continue
        for right in m.right:
            rows.append(
                (m.match_id, m.status, m.pass_name, m.difference, m.reason, position, right)
            )
    for position in sorted({*outcome.unmatched_right, *outcome.resolved_right}):
        status, reason = one_sided(outcome, SideName.RIGHT, position)
        rows.append((None, status, None, None, reason, None, position))
    return rows


def one_sided(outcome: Any, side: SideName, position: int) -> tuple[MatchStatus, str]:
    """A row in no match: resolved by an analyst, or unmatched; and its reason."""
    resolved = outcome.resolved_left if side is SideName.LEFT else outcome.resolved_right
    if position in resolved:
        return MatchStatus.RESOLVED, resolved[position]
    unmatched = outcome.unmatched_left if side is SideName.LEFT else outcome.unmatched_right
    return MatchStatus.UNMATCHED, unmatched[position]


@settings(max_examples=400, deadline=None)
@given(cases())
def test_the_engine_decides_as_the_model_does(case: tuple[Any, ...]) -> None:
    d, left, right, manual = case
    outcome = run_engine(d, left, right, manual)
    assert as_model(outcome) == run_model(d, left, right, manual)
    # last_run's amounts per status, as a full run counts them (totals.py), are the model's
    sides = zip(SideName, (left, right), strict=True)
    tables = [SideTable.of(side_rows(d, which, rows)) for which, rows in sides]
    figures = totals.full(d, tables, totals.statuses(outcome), SCALE)
    assert figures == model(d, left, right, manual).run().totals()
    for m in outcome.matches:
        assert m.match_id == min(m.left)
    rows = list(output_rows(outcome))
    assert rows == plain_output_rows(outcome, len(left))
    lefts = [r[5] for r in rows if r[5] is not None]
    assert lefts == sorted(lefts)
    assert set(lefts) == set(range(1, len(left) + 1))
    assert {r[6] for r in rows if r[6] is not None} == set(range(1, len(right) + 1))
    one_sided_rows = outcome[1:]  # unmatched, then resolved, left then right
    assert len(rows) == sum(len(m.left) * len(m.right) for m in outcome.matches) + sum(
        map(len, one_sided_rows)
    )
    for reason in [reason for rows_ in one_sided_rows for reason in rows_.values()]:
        assert reason
        assert "not taken" not in reason


@settings(max_examples=200, deadline=None)
@given(cases())
def test_keys_whose_hashes_collide_are_decided_as_the_model_does(case: tuple[Any, ...]) -> None:
    """A one-to-one pass joins keys by their hash first (key_join.py): with a hash that
    makes most keys collide, the general path must still decide as the model does."""
    d, left, right, manual = case
    with patch.object(key_join, "key_hash", lambda key: len(repr(key)) % 3):
        outcome = run_engine(d, left, right, manual)
    assert as_model(outcome) == run_model(d, left, right, manual)


WIDE_ROWS = st.lists(  # one key or two, amounts and days close: many pairs, many ties
    st.fixed_dictionaries(
        {
            "ref": st.sampled_from(["A", "A", "B"]),
            "code": st.just(None),
            "amount": st.sampled_from([*range(-3, 4), None]),
            "day": st.sampled_from([*range(5), None]),
            "note": st.integers(0, 1),
            "cur": CURRENCIES,
        }
    ),
    min_size=2,
    max_size=12,
)


@st.composite
def wide_cases(draw: st.DrawFn) -> tuple[Any, ...]:
    """One-to-one passes whose key groups hold many candidate pairs: wide tolerances and
    windows, one-sided ones, passes without keys."""
    with_amount, with_date = draw(st.booleans()), draw(st.booleans())
    one_pass = st.fixed_dictionaries(
        {
            "type": st.just("one_to_one"),
            "keys": st.sampled_from([[], [{"left": "ref", "right": "ref"}]]),
            "amount_tolerance": st.sampled_from(["0", "0.01", "0.02", "0.04"]),
            "date_window": st.sampled_from([[0, 0], [-2, 2], [1, 3], [-3, -1], [0, 1]]),
            "auto_confirm": st.booleans(),
        }
    )
    chosen = draw(st.lists(one_pass, min_size=1, max_size=2))
    d = definition(
        [{"name": f"p{n}", **p} for n, p in enumerate(chosen)],
        amount=with_amount,
        date=with_date,
        currency=draw(st.booleans()),
    )
    left, right = draw(WIDE_ROWS), draw(WIDE_ROWS)
    return d, left, right, draw(manual_work(len(left), len(right)))


@settings(max_examples=300, deadline=None)
@given(st.one_of(cases(), wide_cases()), st.sampled_from([-1, 0, 1, 3]))
def test_key_groups_matched_without_listing_their_pairs_are_decided_as_the_model_does(
    case: tuple[Any, ...], listed: int
) -> None:
    """A key group with more candidate pairs than a one-to-one pass lists is matched level
    by level (large_groups.py), and the listed groups in batches: with a bound this low,
    most groups of these small cases go either way, and must decide as the model does."""
    d, left, right, manual = case
    with patch.object(pass_module, "LISTED_PAIRS", listed):
        outcome = run_engine(d, left, right, manual)
    assert as_model(outcome) == run_model(d, left, right, manual)


@settings(max_examples=200, deadline=None)
@given(cases(), st.randoms(use_true_random=False))
def test_shuffled_input_gives_the_same_outcome(case: tuple[Any, ...], rnd: random.Random) -> None:
    d, left, right, manual = case
    lookup = content(left, right)
    left_rows = side_rows(d, SideName.LEFT, left)
    right_rows = side_rows(d, SideName.RIGHT, right)
    tables = SideTable.of(left_rows), SideTable.of(right_rows)
    first = reconcile(d, *tables, manual, scale=SCALE, content=lookup)
    rnd.shuffle(left_rows)
    rnd.shuffle(right_rows)
    tables = SideTable.of(left_rows), SideTable.of(right_rows)
    assert reconcile(d, *tables, manual, scale=SCALE, content=lookup) == first
