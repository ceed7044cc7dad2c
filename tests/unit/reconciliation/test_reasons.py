"""Every unmatched row's reason: the pass that explains it, its nearest candidate and what
failed, with numbers (issue #11, section 2)."""

from __future__ import annotations

from support.reconciliation_cases import definition, row, run_engine
from tally.services.reconciliation.reasons import days, money

EXACT = {"name": "exact", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]}
NEAR = {**EXACT, "name": "near", "amount_tolerance": "0.05", "date_window": [-3, 3]}


def test_money_and_days_are_exact_words() -> None:
    assert [money(v, 2) for v in (0, 5, -5, 123456, -100)] == [
        "0.00",
        "0.05",
        "-0.05",
        "1234.56",
        "-1.00",
    ]
    assert money(7, 0) == "7"
    assert [days(s) for s in (0, 1, -1, 3, -2)] == [
        "the same day",
        "1 day later",
        "1 day earlier",
        "3 days later",
        "2 days earlier",
    ]


def test_no_candidate_names_the_other_side_and_the_value() -> None:
    outcome = run_engine(definition([EXACT, NEAR]), [row("INV-9")], [row("INV-8")])
    assert outcome.unmatched_left == {1: "no ledger row with ref 'INV-9'"}
    assert outcome.unmatched_right == {1: "no bank row with ref 'INV-8'"}


def test_no_candidate_says_which_normalisers_applied() -> None:
    keys = [{"left": "ref", "right": "ref", "normalize": ["trim", "casefold"]}]
    outcome = run_engine(definition([{**EXACT, "keys": keys}]), [row(" Inv-9")], [])
    assert outcome.unmatched_left == {1: "no ledger row with ref ' Inv-9' (after trim, casefold)"}


def test_the_last_pass_with_candidates_explains_with_numbers() -> None:
    outcome = run_engine(definition([EXACT, NEAR]), [row("R", 1000, 10)], [row("R", 1007, 15)])
    assert outcome.unmatched_left == {
        1: "near: nearest ledger row 1 (ref R): amount differs by 0.07, tolerance 0.05; "
        "ledger date 5 days later, window -3..3"
    }
    assert outcome.unmatched_right == {
        1: "near: nearest bank row 1 (ref R): amount differs by 0.07, tolerance 0.05; "
        "ledger date 5 days later, window -3..3"
    }


def test_a_split_pass_of_one_row_a_side_leaves_the_words_to_the_one_to_one_pass() -> None:
    """A group of one row a side fails the split pass on its exact sum; the near pass's
    tolerance is the yardstick the analyst needs (issue #11: `amount differs by 0.07,
    tolerance 0.05`)."""
    split = {**EXACT, "name": "split", "type": "one_to_many"}
    outcome = run_engine(definition([EXACT, NEAR, split]), [row("R", 4200)], [row("R", 4207)])
    assert outcome.unmatched_left == {
        1: "near: nearest ledger row 1 (ref R): amount differs by 0.07, tolerance 0.05"
    }
    assert outcome.unmatched_right == {
        1: "near: nearest bank row 1 (ref R): amount differs by 0.07, tolerance 0.05"
    }


def test_a_real_split_explains_with_its_sum() -> None:
    split = {**EXACT, "name": "split", "type": "one_to_many"}
    right = [row("R", 4000), row("R", 207)]
    outcome = run_engine(definition([EXACT, NEAR, split]), [row("R", 4200)], right)
    assert outcome.unmatched_left[1].startswith("split: ")
    assert "42.07" in outcome.unmatched_left[1]


def test_a_row_no_key_finds_is_said_so_before_its_nearest_by_amount() -> None:
    loose = {"name": "loose", "type": "one_to_one", "keys": [], "date_window": [-1, 1]}
    outcome = run_engine(definition([EXACT, loose]), [row("FEE", 1500, 10)], [row("X", 1840, 12)])
    assert outcome.unmatched_left == {
        1: "no ledger row with ref 'FEE'; loose: nearest ledger row 1: amount differs by 3.40, "
        "tolerance 0.00; ledger date 2 days later, window -1..1"
    }


def test_the_nearest_of_several_candidates_is_named() -> None:
    left = [row("R", 1000, 10)]
    right = [row("R", 1100, 10), row("R", 1009, 20), row("R", 1009, 11)]
    outcome = run_engine(definition([NEAR]), left, right)
    assert (
        outcome.unmatched_left[1]
        == "near: nearest ledger row 3 (ref R): amount differs by 0.09, tolerance 0.05"
    )


def test_empty_keys_and_empty_dates_are_said() -> None:
    outcome = run_engine(definition([EXACT]), [row(None), row("R", 5, None)], [row("R", 5, 1)])
    assert outcome.unmatched_left == {
        1: "bank keys are empty: no pass can match this row",
        2: "exact: nearest ledger row 1 (ref R): bank date is empty",
    }


def test_a_split_part_left_over_names_the_match_that_took_its_row() -> None:
    # The exception: one part within tolerance of the whole goes to the near pass.
    split = {**EXACT, "name": "split", "type": "one_to_many"}
    near = {**NEAR, "amount_tolerance": "0.01"}
    outcome = run_engine(
        definition([EXACT, near, split]), [row("S", 1000, 3)], [row("S", 999, 3), row("S", 1, 3)]
    )
    assert [(m.pass_name, m.right) for m in outcome.matches] == [("near", (1,))]
    assert outcome.unmatched_right == {
        2: "split: bank row 1 (ref S) was matched to ledger row 1 by pass 'near'"
    }


def test_the_nearest_among_many_candidates_is_found_by_amount() -> None:
    right = [row("C", 2000 + k, 10) for k in range(100)]
    right[70] = row("C", 1010, 12)
    outcome = run_engine(definition([NEAR]), [row("C", 1000, 10)], right)
    assert outcome.unmatched_left[1] == (
        "near: nearest ledger row 71 (ref C): amount differs by 0.10, tolerance 0.05"
    )
