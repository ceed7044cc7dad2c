"""The matching engine's passes: what matches, what does not, and which pair wins."""

from __future__ import annotations

from typing import Any

import pytest

from support.reconciliation_cases import definition, row, run_engine, side_rows
from tally.core.reconciliation import (
    ManualMatch,
    ManualWork,
    MatchStatus,
    Rejection,
    Resolution,
    SideName,
)
from tally.services.reconciliation.matching import (
    SideRow,
    SideTable,
    key_columns,
    output_rows,
    reconcile,
)

EXACT = {"name": "exact", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]}


def near(tolerance: str = "0.05", window: list[int] | None = None) -> dict[str, Any]:
    return {
        **EXACT,
        "name": "near",
        "amount_tolerance": tolerance,
        "date_window": window or [-3, 3],
    }


def split(kind: str = "one_to_many", window: list[int] | None = None) -> dict[str, Any]:
    return {**EXACT, "name": "split", "type": kind, "date_window": window or [0, 0]}


def pairs(outcome: Any) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [(m.left, m.right) for m in outcome.matches]


def test_an_exact_pair_matches() -> None:
    outcome = run_engine(definition([EXACT]), [row("R", 100, 5)], [row("R", 100, 5)])
    (match,) = outcome.matches
    assert match.match_id == 1
    assert match.status is MatchStatus.MATCHED
    assert (match.pass_name, match.difference, match.left, match.right) == ("exact", 0, (1,), (1,))
    assert match.reason == "exact: keys equal, amount equal, date equal"
    assert outcome.unmatched_left == outcome.unmatched_right == {}


@pytest.mark.parametrize(("gap", "matches"), [(5, True), (-5, True), (6, False), (-6, False)])
def test_the_tolerance_is_inclusive_to_the_cent(gap: int, matches: bool) -> None:
    outcome = run_engine(definition([near()]), [row("R", 1000)], [row("R", 1000 + gap)])
    assert pairs(outcome) == ([((1,), (1,))] if matches else [])
    if matches:
        (match,) = outcome.matches
        assert match.status is MatchStatus.MATCHED_WITH_DIFFERENCE
        assert match.difference == -gap
        assert (
            match.reason == "near: keys equal, amount differs by 0.05 (tolerance 0.05), date equal"
        )


@pytest.mark.parametrize(("shift", "matches"), [(3, True), (-3, True), (4, False), (-4, False)])
def test_the_window_is_inclusive_to_the_day(shift: int, matches: bool) -> None:
    outcome = run_engine(definition([near()]), [row("R", 1000, 10)], [row("R", 1000, 10 + shift)])
    assert pairs(outcome) == ([((1,), (1,))] if matches else [])


def test_an_asymmetric_window_is_right_minus_left() -> None:
    d = definition([near("0", [-3, 1])])
    assert pairs(run_engine(d, [row("R", 1, 10)], [row("R", 1, 7)])) == [((1,), (1,))]
    assert pairs(run_engine(d, [row("R", 1, 10)], [row("R", 1, 12)])) == []


def test_the_smallest_amount_difference_wins() -> None:
    left = [row("R", 1000, 5)]
    right = [row("R", 1003, 5), row("R", 999, 8), row("R", 1002, 5)]
    assert pairs(run_engine(definition([near()]), left, right)) == [((1,), (2,))]


def test_then_the_smallest_date_difference() -> None:
    left = [row("R", 1000, 5)]
    right = [row("R", 1000, 7), row("R", 1000, 4), row("R", 1000, 8)]
    assert pairs(run_engine(definition([near()]), left, right)) == [((1,), (2,))]


def test_then_the_rows_content_never_their_position() -> None:
    # Equal amounts and dates: the left row whose content sorts first wins, wherever it is.
    right = [row("R", 1000, 5)]
    for notes, winner in (([2, 1], 2), ([1, 2], 1)):
        left = [row("R", 1000, 5, note=n) for n in notes]
        assert pairs(run_engine(definition([EXACT]), left, right)) == [((winner,), (1,))]
    # An empty value sorts first; then the right row's content decides.
    left = [row("R", 1000, 5, note=None), row("R", 1000, 5, note=0)]
    right = [row("R", 1000, 5, note=3), row("R", 1000, 5, note=None)]
    assert pairs(run_engine(definition([EXACT]), left, right)) == [((1,), (2,)), ((2,), (1,))]


def test_identical_rows_are_interchangeable_and_taken_by_position() -> None:
    left = [row("R", 1000, 5)] * 3
    right = [row("R", 1000, 5)] * 2
    outcome = run_engine(definition([EXACT]), left, right)
    assert pairs(outcome) == [((1,), (1,)), ((2,), (2,))]
    assert list(outcome.unmatched_left) == [3]


def test_the_content_lookup_is_asked_only_to_break_ties() -> None:
    asked: list[tuple[SideName, tuple[int, ...]]] = []

    def content(which: SideName, positions: Any) -> dict[int, tuple[Any, ...]]:
        asked.append((which, tuple(positions)))
        return {p: (-p,) for p in positions}  # the later row sorts first

    d = definition([EXACT])
    left = side_rows(d, SideName.LEFT, [row("R", 1), row("S", 2), row("S", 2), row("T", 3)])
    right = side_rows(d, SideName.RIGHT, [row("R", 1), row("S", 2), row("T", 3), row("T", 4)])
    outcome = reconcile(
        d, SideTable.of(left), SideTable.of(right), ManualWork(), scale=2, content=content
    )
    assert asked == [(SideName.LEFT, (2, 3)), (SideName.RIGHT, (2,))]  # the tied rows only
    assert pairs(outcome) == [((1,), (1,)), ((3,), (2,)), ((4,), (3,))]


def test_an_empty_key_equals_nothing() -> None:
    outcome = run_engine(definition([EXACT]), [row(None, 1)], [row(None, 1)])
    assert pairs(outcome) == []


def test_normalisers_apply_before_comparing() -> None:
    d = definition(
        [{**EXACT, "keys": [{"left": "ref", "right": "ref", "normalize": ["trim", "casefold"]}]}]
    )
    assert pairs(run_engine(d, [row(" Ref-7", 1)], [row("REF-7 ", 1)])) == [((1,), (1,))]


def test_two_key_columns_must_both_be_equal() -> None:
    keys = [{"left": "ref", "right": "ref"}, {"left": "code", "right": "code"}]
    d = definition([{**EXACT, "keys": keys}])
    left = [row("R", 1, code="a"), row("R", 1, code="b")]
    right = [row("R", 1, code="b"), row("R", 1, code=None)]
    assert pairs(run_engine(d, left, right)) == [((2,), (1,))]


def test_an_empty_amount_matches_nothing_where_amounts_are_compared() -> None:
    outcome = run_engine(definition([EXACT]), [row("R", None)], [row("R", 1)])
    assert pairs(outcome) == []
    assert outcome.unmatched_left[1] == "exact: nearest ledger row 1 (ref R): bank amount is empty"


def test_without_amounts_or_dates_keys_alone_decide() -> None:
    d = definition([EXACT], amount=False, date=False)
    (match,) = run_engine(d, [row("R", None, None)], [row("R", 5, 9)]).matches
    assert (match.difference, match.status, match.reason) == (
        None,
        MatchStatus.MATCHED,
        "exact: keys equal",
    )


def test_a_pass_without_keys_pairs_by_amount_and_date() -> None:
    d = definition(
        [
            {
                "name": "loose",
                "type": "one_to_one",
                "keys": [],
                "date_window": [-1, 1],
                "auto_confirm": False,
            }
        ]
    )
    left = [row("A", 500, 10), row("B", 700, 10)]
    right = [row("X", 700, 11), row("Y", 500, 12), row("Z", 500, 9)]
    outcome = run_engine(d, left, right)
    assert pairs(outcome) == [((1,), (3,)), ((2,), (1,))]
    assert {m.status for m in outcome.matches} == {MatchStatus.SUGGESTED}
    assert (
        outcome.unmatched_right[2]
        == "loose: bank row 1 was matched to ledger row 3 by pass 'loose'"
    )
    outcome = run_engine(d, left[:1], right[1:2])
    assert (
        outcome.unmatched_right[1]
        == "loose: nearest bank row 1: ledger date 2 days later, window -1..1"
    )


def test_a_pass_without_keys_with_a_tolerance_takes_the_nearest_amounts() -> None:
    d = definition(
        [{"name": "loose", "type": "one_to_one", "keys": [], "amount_tolerance": "0.10"}]
    )
    left = [row("A", 500), row("B", 520)]
    right = [row("X", 515), row("Y", 509), row("Z", 531)]
    assert pairs(run_engine(d, left, right)) == [((1,), (2,)), ((2,), (1,))]


def test_a_row_matched_by_one_pass_is_taken_by_no_later_pass() -> None:
    left = [row("R", 1000, 5)]
    right = [row("R", 1001, 5), row("R", 1000, 5)]
    outcome = run_engine(definition([EXACT, near()]), left, right)
    assert [(m.pass_name, m.right) for m in outcome.matches] == [("exact", (2,))]
    assert outcome.unmatched_right == {
        1: "near: bank row 1 (ref R) was matched to ledger row 2 by pass 'exact'"
    }


def test_one_to_many_takes_the_whole_group() -> None:
    left = [row("S", 1000, 5)]
    right = [row("S", 300, 5), row("S", 700, 5), row("T", 1000, 5)]
    (match,) = run_engine(definition([split()]), left, right).matches
    assert (match.left, match.right, match.difference) == ((1,), (1, 2), 0)
    assert match.reason == "split: keys equal, sum equal, dates equal"


def test_one_to_many_is_all_or_none() -> None:
    left = [row("S", 1000, 5)]
    right = [row("S", 300, 5), row("S", 700, 5), row("S", 1, 5)]
    outcome = run_engine(definition([split()]), left, right)
    assert pairs(outcome) == []
    reason = (
        "split: bank row 1 (ref S) amount 10.00, ledger rows 1, 2, 3 sum 10.01: "
        "differ by 0.01, tolerance 0.00"
    )
    assert outcome.unmatched_left == {1: reason}
    assert outcome.unmatched_right == {1: reason, 2: reason, 3: reason}


def test_one_to_many_leaves_out_rows_outside_the_window() -> None:
    left = [row("S", 1000, 5)]
    right = [row("S", 300, 4), row("S", 700, 6), row("S", 5, 9)]
    outcome = run_engine(definition([split(window=[-1, 1])]), left, right)
    assert pairs(outcome) == [((1,), (1, 2))]
    assert outcome.matches[0].reason == (
        "split: keys equal, sum equal, ledger dates 1 day earlier to 1 day later (window -1..1)"
    )
    assert outcome.unmatched_right == {
        3: "split: bank row 1 (ref S) was matched to ledger rows 1, 2 by pass 'split'"
    }


def test_one_to_many_refuses_a_key_two_left_rows_share() -> None:
    left = [row("S", 1000, 5), row("S", 1000, 5)]
    right = [row("S", 300, 5), row("S", 700, 5)]
    outcome = run_engine(definition([split()]), left, right)
    assert pairs(outcome) == []
    reason = (
        "split: 2 bank rows share ref 'S' (bank rows 1, 2); "
        "the pass matches one bank row to many ledger rows"
    )
    assert set(outcome.unmatched_left.values()) == set(outcome.unmatched_right.values()) == {reason}


def test_many_to_one_mirrors_it() -> None:
    left = [row("S", 250, 5), row("S", 750, 6)]
    right = [row("S", 1000, 6)]
    d = definition([split("many_to_one", [0, 1])])
    (match,) = run_engine(d, left, right).matches
    assert (match.match_id, match.left, match.right, match.difference) == (1, (1, 2), (1,), 0)
    assert pairs(run_engine(d, left, [*right, row("S", 1000, 6)])) == []


def test_a_pass_that_does_not_auto_confirm_suggests() -> None:
    (match,) = run_engine(
        definition([{**EXACT, "auto_confirm": False}]), [row("R")], [row("R")]
    ).matches
    assert match.status is MatchStatus.SUGGESTED


def test_manual_matches_come_first_and_keep_their_rows() -> None:
    left = [row("R", 1000), row("Q", 1000)]
    right = [row("R", 1000), row("Z", 990)]
    manual = ManualWork((ManualMatch(1, (1,), (2,), "paid by cheque"),))
    outcome = run_engine(definition([EXACT]), left, right, manual)
    (match,) = outcome.matches
    assert (match.left, match.right, match.status, match.pass_name) == (
        (1,),
        (2,),
        MatchStatus.MANUAL,
        "manual",
    )
    assert (match.difference, match.reason) == (
        10,
        "manual: matched by an analyst, amount differs by 0.10 (paid by cheque)",
    )
    assert outcome.unmatched_right == {
        1: "exact: bank row 1 (ref R) was matched to ledger row 2 by an analyst"
    }


def test_a_rejected_pair_is_never_matched_again() -> None:
    left = [row("R", 1000)]
    right = [row("R", 1000), row("R", 1000)]
    manual = ManualWork(rejections=(Rejection((1,), (1,)),))
    assert pairs(run_engine(definition([EXACT]), left, right, manual)) == [((1,), (2,))]
    outcome = run_engine(definition([EXACT]), left, right[:1], manual)
    assert outcome.unmatched_left == {
        1: "exact: nearest ledger row 1 (ref R): an analyst rejected this pair"
    }
    group = ManualWork(rejections=(Rejection((1,), (1, 2)),))
    assert (
        pairs(run_engine(definition([split()]), [row("S", 2)], [row("S", 1), row("S", 1)], group))
        == []
    )


def test_positions_name_rows_and_may_not_repeat() -> None:
    d = definition([EXACT])
    with pytest.raises(ValueError, match="ledger: position 4 appears twice"):
        SideTable.of([SideRow(4, ("R",), 1, 1), SideRow(4, ("R",), 1, 1)], "ledger")
    unordered = SideTable([2, 1], (["R", "R"],), [1, 1], [1, 1])
    with pytest.raises(ValueError, match="ledger: positions are not ascending"):
        reconcile(d, SideTable.of([]), unordered, ManualWork(), scale=2, content=dict)  # type: ignore[arg-type]


def test_key_columns_are_each_sides_distinct_keys_in_order() -> None:
    keys = [{"left": "ref", "right": "reference"}, {"left": "code", "right": "code"}]
    d = definition([{**EXACT, "keys": keys}, {**near("0.005"), "keys": keys[1:]}, near("0.1")])
    assert key_columns(d, SideName.LEFT) == ("ref", "code")
    assert key_columns(d, SideName.RIGHT) == ("reference", "code", "ref")


def test_output_rows_are_in_the_outputs_order() -> None:
    left = [row("B", 1000, 5), row("S", 1000, 5), row("X", 5, 5), row("A", 7, 5)]
    right = [row("S", 700, 5), row("A", 7, 5), row("Y", 1), row("S", 300, 5), row("B", 1000, 5)]
    outcome = run_engine(definition([EXACT, split()]), left, right)
    unmatched = MatchStatus.UNMATCHED
    assert list(output_rows(outcome)) == [
        (1, MatchStatus.MATCHED, "exact", 0, "exact: keys equal, amount equal, date equal", 1, 5),
        (2, MatchStatus.MATCHED, "split", 0, "split: keys equal, sum equal, dates equal", 2, 1),
        (2, MatchStatus.MATCHED, "split", 0, "split: keys equal, sum equal, dates equal", 2, 4),
        (None, unmatched, None, None, "no ledger row with ref 'X'", 3, None),
        (4, MatchStatus.MATCHED, "exact", 0, "exact: keys equal, amount equal, date equal", 4, 2),
        (None, unmatched, None, None, "no bank row with ref 'Y'", None, 3),
    ]
    assert [m.match_id for m in outcome.matches] == [1, 2, 4]
    assert outcome.matches[1] == list(outcome.matches)[1] == outcome.matches[1:2][0]


def test_many_to_one_refuses_a_key_two_right_rows_share() -> None:
    left = [row("S", 250, 5), row("S", 750, 5)]
    right = [row("S", 1000, 5), row("S", 1000, 5)]
    outcome = run_engine(definition([split("many_to_one")]), left, right)
    assert pairs(outcome) == []
    assert outcome.unmatched_left[1] == (
        "split: 2 ledger rows share ref 'S' (ledger rows 1, 2); "
        "the pass matches one ledger row to many bank rows"
    )


def test_a_rejected_group_says_so() -> None:
    manual = ManualWork(rejections=(Rejection((1,), (2,)),))
    outcome = run_engine(definition([split()]), [row("S", 2)], [row("S", 1), row("S", 1)], manual)
    reason = "split: bank row 1 (ref S) with ledger rows 1, 2: an analyst rejected this match"
    assert outcome.unmatched_left == {1: reason}
    assert outcome.unmatched_right == {1: reason, 2: reason}


def test_a_manual_match_keeps_the_rows_still_in_the_inputs() -> None:
    manual = ManualWork((ManualMatch(1, (1, 9), (1,)), ManualMatch(2, (2,), (8,))))
    outcome = run_engine(definition([EXACT]), [row("A"), row("B")], [row("Z")], manual)
    assert [(m.left, m.right, m.pass_name) for m in outcome.matches] == [((1,), (1,), "manual")]
    assert outcome.unmatched_left == {2: "no ledger row with ref 'B'"}


def test_an_empty_side_leaves_the_other_unmatched() -> None:
    d = definition([EXACT, split(), {**EXACT, "name": "loose", "keys": []}])
    outcome = run_engine(d, [row("R", 5)], [])
    assert (list(outcome.matches), outcome.unmatched_left) == (
        [],
        {1: "no ledger row with ref 'R'; loose: no ledger row"},
    )
    outcome = run_engine(d, [], [row("R", 5)])
    assert (list(outcome.matches), outcome.unmatched_right) == (
        [],
        {1: "no bank row with ref 'R'; loose: no bank row"},
    )
    assert run_engine(d, [], []) == ([], {}, {}, {}, {})


def test_amounts_past_64_bits_are_compared_exactly() -> None:
    big = 10**30
    outcome = run_engine(
        definition([near("0.01")]),
        [row("R", big), row("S", big), row("T", -big)],
        [row("R", big + 1), row("S", big + 2), row("T", -big)],
    )
    assert [(m.left, m.right, m.difference) for m in outcome.matches] == [
        ((1,), (1,), -1),
        ((3,), (3,), 0),
    ]
    assert "amount differs by 0.02, tolerance 0.01" in outcome.unmatched_left[2]


def test_a_resolved_row_is_taken_by_no_pass_and_shown_resolved() -> None:
    """A one-sided resolution closes its rows before any pass: the counterpart a pass
    would have paired stays unmatched, its reason naming the resolution; a resolution
    naming a row a manual match took leaves it the match's."""
    d = definition([EXACT])
    left = [row("R", 100), row("F", 5), row("M", 7)]
    right = [row("R", 100), row("M", 7)]
    manual = ManualWork(
        matches=(ManualMatch(3, (3,), (2,)),),
        resolutions=(
            Resolution(SideName.LEFT, (2, 3), "bank_fee", "monthly fee"),
            Resolution(SideName.RIGHT, (1,), "timing"),
        ),
    )
    outcome = run_engine(d, left, right, manual)
    assert pairs(outcome) == [((3,), (2,))]
    assert outcome.resolved_left == {2: "resolved: bank_fee, by an analyst (monthly fee)"}
    assert outcome.resolved_right == {1: "resolved: timing, by an analyst"}
    assert outcome.unmatched_left == {
        1: "exact: ledger row 1 (ref R) was resolved by an analyst (timing)"
    }
    assert outcome.unmatched_right == {}
    assert [(r[1], r[5], r[6]) for r in output_rows(outcome)] == [
        (MatchStatus.UNMATCHED, 1, None),
        (MatchStatus.RESOLVED, 2, None),
        (MatchStatus.MANUAL, 3, 2),
        (MatchStatus.RESOLVED, None, 1),
    ]
