"""Currencies in the engine (issue #32, point 4): part of every pass's key, never compared
as amounts across, and named in the reasons; last_run's totals per currency."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from unittest.mock import patch

import pytest

from support.reconciliation_cases import definition, per_side, row, run_engine, side_rows
from tally.core.errors import InvalidBodyError
from tally.core.reconciliation import (
    ManualMatch,
    ManualWork,
    ReconciliationDefinition,
    SideName,
    currency_code,
)
from tally.services.reconciliation import passes as pass_module
from tally.services.reconciliation import totals
from tally.services.reconciliation.bodies import parse_definition
from tally.services.reconciliation.matching import SideTable
from tally.services.reconciliation.totals import MATCHED, RESOLVED, SPLIT, UNMATCHED

KEYED = [{"name": "ref", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]}]
KEYLESS = [{"name": "any", "type": "one_to_one", "keys": [], "amount_tolerance": "1"}]


def test_a_currency_is_compared_trimmed_and_upper_cased() -> None:
    assert [currency_code(v) for v in (" usd", "Eur ", "GBP", " ", "", None)] == [
        "USD",
        "EUR",
        "GBP",
        None,
        None,
        None,
    ]


@pytest.mark.parametrize("listed", [0, 20_000])
def test_a_pass_without_keys_matches_within_each_currency(listed: int) -> None:
    """Listed or matched level by level (large_groups.py), each currency is a group."""
    d = definition(KEYLESS, currency=True)
    left = [row(amount=100, cur="USD"), row(amount=100, cur="EUR"), row(amount=100, cur="GBP")]
    right = [row(amount=100, cur="gbp"), row(amount=101, cur="usd "), row(amount=100, cur="JPY")]
    with patch.object(pass_module, "LISTED_PAIRS", listed):
        outcome = run_engine(d, left, right)
    assert [(m.left, m.right, m.difference) for m in outcome.matches] == [
        ((1,), (2,), -1),
        ((3,), (1,), 0),
    ]
    assert (
        outcome.unmatched_left[2] == "any: nearest ledger row 3: currency differs: EUR against JPY"
    )


def test_the_nearest_candidate_is_of_the_rows_currency_even_when_taken() -> None:
    d = definition(
        [*KEYED, {**KEYED[0], "name": "near", "amount_tolerance": "0.05"}], currency=True
    )
    left = [row("A", 100, cur="USD"), row("A", 100, cur="USD")]
    right = [row("A", 100, cur="EUR"), row("A", 100, cur="USD")]
    outcome = run_engine(d, left, right)
    assert outcome.unmatched_left[2] == (
        "near: ledger row 2 (ref A) was matched to bank row 1 by pass 'ref'"
    )
    assert outcome.unmatched_right[1] == (  # no amount compared across currencies
        "near: nearest bank row 2 (ref A): currency differs: EUR against USD"
    )


def test_a_candidate_of_another_currency_is_named_for_it_even_when_taken() -> None:
    """Its match says less than its currency, which no match would change."""
    d = definition(KEYED, currency=True)
    left = [row("A", 100, cur="EUR"), row("A", 100, cur="USD")]
    outcome = run_engine(d, left, [row("A", 100, cur="EUR")])
    assert outcome.unmatched_left[2] == (
        "ref: nearest ledger row 1 (ref A): currency differs: USD against EUR"
    )


def test_rows_sharing_a_key_in_one_currency_say_which() -> None:
    d = definition(
        [{"name": "split", "type": "one_to_many", "keys": [{"left": "ref", "right": "ref"}]}],
        currency=True,
    )
    left = [row("S", 10, cur="EUR"), row("S", 10, cur="eur"), row("S", 10, cur="USD")]
    right = [row("S", 4, cur="EUR"), row("S", 6, cur="EUR"), row("S", 10, cur="USD")]
    outcome = run_engine(d, left, right)
    assert [(m.left, m.right) for m in outcome.matches] == [((3,), (3,))]
    assert outcome.unmatched_left[1] == (
        "split: 2 bank rows share ref 'S' in EUR (bank rows 1, 2); the pass matches one bank "
        "row to many ledger rows"
    )


def test_a_manual_match_across_currencies_has_no_difference() -> None:
    """Only one made before the sides named currencies can: the API refuses new ones."""
    d = definition(KEYED, currency=True)
    left = [row("A", 100, cur="USD"), row("B", 5, cur=None)]
    right = [row("C", 90, cur="EUR"), row("D", 3, cur="EUR")]
    manual = ManualWork((ManualMatch(1, (1,), (1,)), ManualMatch(2, (2,), (2,))))
    outcome = run_engine(d, left, right, manual)
    assert [(m.left, m.difference) for m in outcome.matches] == [((1,), None), ((2,), 2)]


def table(d: ReconciliationDefinition, which: SideName, rows: list[dict[str, Any]]) -> SideTable:
    return SideTable.of(side_rows(d, which, rows))


def test_totals_per_currency_and_their_adjustment_give_the_full_figures() -> None:
    d = definition(KEYED, currency=True)
    left = [row("A", 100, cur="USD"), row("B", 250, cur="eur"), row("C", None, cur="EUR")]
    right = [row("A", 100, cur="USD"), row("Z", 7, cur=None)]
    tables = [table(d, SideName.LEFT, left), table(d, SideName.RIGHT, right)]
    shown = totals.full(d, tables, [{UNMATCHED: {2, 3}}, {UNMATCHED: {2}}], 2)
    assert shown["amounts"] == {
        "": per_side(("0.00", "0.00"), ("0.00", "0.07")),
        "EUR": per_side(("0.00", "2.50"), ("0.00", "0.00")),
        "USD": per_side(("1.00", "0.00"), ("1.00", "0.00")),
    }
    # A late GBP ledger row: the last totals adjusted are the totals counted again.
    late = [*right, row("B", 250, cur="GBP")]
    now = [table(d, SideName.LEFT, left), table(d, SideName.RIGHT, late)]
    again = totals.full(d, now, [{UNMATCHED: {2, 3}}, {UNMATCHED: {2, 3}}], 2)
    examined = SideTable.of(side_rows(d, SideName.RIGHT, late)[2:])
    adjusted = totals.adjusted(
        d,
        shown,
        [(SideName.RIGHT, examined, 3)],
        {SideName.LEFT: {}, SideName.RIGHT: {}},
        {SideName.LEFT: {}, SideName.RIGHT: {3: UNMATCHED}},
        2,
    )
    assert adjusted == again
    assert adjusted["amounts"]["GBP"]["right"] == per_side(("0.00", "2.50"), ("0.00",))["left"]
    # The same row resolved by an analyst: its amount moves from unmatched to resolved,
    # signed and absolute alike.
    closed = totals.moved(
        d, adjusted, SideName.RIGHT, examined, source="unmatched", target="resolved", scale=2
    )
    for key in ("amounts", "absolute_amounts"):
        assert closed[key]["GBP"]["right"] == per_side(("0.00", "0.00", "2.50"), ("0.00",))["left"]
    resolved = totals.full(d, now, [{UNMATCHED: {2, 3}}, {UNMATCHED: {2}, RESOLVED: {3}}], 2)
    assert resolved == closed
    assert (
        totals.moved(
            d, closed, SideName.RIGHT, examined, source="resolved", target="unmatched", scale=2
        )
        == again
    )


def test_totals_without_currencies_keep_their_shape() -> None:
    d = definition(KEYED)
    tables = [table(d, SideName.LEFT, [row("A", 100)]), table(d, SideName.RIGHT, [row("A", 100)])]
    shown = totals.full(d, tables, [{}, {UNMATCHED: {1}}], 2)
    assert shown["amounts"] == per_side(("1.00", "0.00"), ("0.00", "1.00"))
    no_amounts = definition(KEYED, amount=False)
    assert totals.full(no_amounts, tables, [{}, {}], 2) == {
        "amounts": {"left": None, "right": None},
        "absolute_amounts": {"left": None, "right": None},
    }


def test_absolute_totals_count_credits_and_debits_alike_and_adjust_as_a_full_run() -> None:
    d = definition(KEYED)
    left = [row("A", 100), row("B", -250), row("C", -40), row("D", None)]
    right = [row("A", 100), row("B", -250)]
    tables = [table(d, SideName.LEFT, left), table(d, SideName.RIGHT, right)]
    shown = totals.full(d, tables, [{UNMATCHED: {3}}, {}], 2)
    assert shown["amounts"] == per_side(("-1.50", "-0.40"), ("-1.50", "0.00"))
    assert shown["absolute_amounts"] == per_side(("3.50", "0.40"), ("3.50", "0.00"))
    # a late right row matches C: its share moves, signed and absolute
    late = [*right, row("C", -40)]
    again = totals.full(d, [tables[0], table(d, SideName.RIGHT, late)], [{}, {}], 2)
    examined_left = SideTable.of(side_rows(d, SideName.LEFT, left)[2:3])
    examined_right = SideTable.of(side_rows(d, SideName.RIGHT, late)[2:])
    adjusted = totals.adjusted(
        d,
        shown,
        [(SideName.LEFT, examined_left, 5), (SideName.RIGHT, examined_right, 3)],
        {SideName.LEFT: {3: UNMATCHED}, SideName.RIGHT: {}},
        {SideName.LEFT: {3: MATCHED}, SideName.RIGHT: {3: MATCHED}},
        2,
    )
    assert adjusted == again
    assert again["absolute_amounts"] == per_side(("3.90", "0.00"), ("3.90", "0.00"))


def test_a_resolved_credit_leaves_unmatched_by_its_absolute_value_in_every_kind_of_run() -> None:
    """A credit resolved by an analyst: -0.40 out of unmatched and into resolved, signed;
    0.40 absolute. A full run that finds it resolved, an incremental run that re-examines
    it, and the action's move at once (and its undo) give the same totals."""
    d = definition(KEYED)
    left = [row("A", 100), row("C", -40)]
    right = [row("A", 100)]
    tables = [table(d, SideName.LEFT, left), table(d, SideName.RIGHT, right)]
    open_ = totals.full(d, tables, [{UNMATCHED: {2}}, {}], 2)
    closed = totals.full(d, tables, [{RESOLVED: {2}}, {}], 2)
    assert closed["amounts"] == per_side(("1.00", "0.00", "-0.40"), ("1.00", "0.00"))
    assert closed["absolute_amounts"] == per_side(("1.00", "0.00", "0.40"), ("1.00", "0.00"))
    credit = SideTable.of(side_rows(d, SideName.LEFT, left)[1:])
    at_once = totals.moved(
        d, open_, SideName.LEFT, credit, source="unmatched", target="resolved", scale=2
    )
    assert at_once == closed
    undone = totals.moved(
        d, at_once, SideName.LEFT, credit, source="resolved", target="unmatched", scale=2
    )
    assert undone == open_
    incremental = totals.adjusted(
        d,
        open_,
        [(SideName.LEFT, credit, 3)],
        {SideName.LEFT: {2: UNMATCHED}, SideName.RIGHT: {}},
        {SideName.LEFT: {2: RESOLVED}, SideName.RIGHT: {}},
        2,
    )
    assert incremental == closed
    # a run from before resolutions kept no `resolved` (nor the split): read as none,
    # and the split stays absent
    older = {
        key: {
            side: {k: v for k, v in figures.items() if k not in ("resolved", SPLIT)}
            for side, figures in per.items()
        }
        for key, per in open_.items()
    }
    assert not totals.kept_split(d, older)
    assert totals.moved(
        d, older, SideName.LEFT, credit, source="unmatched", target="resolved", scale=2
    ) == {
        key: {
            side: {k: v for k, v in figures.items() if k != SPLIT} for side, figures in per.items()
        }
        for key, per in closed.items()
    }


def test_matched_amounts_per_status_sum_to_matched_in_every_kind_of_run() -> None:
    """A suggestion, a match with a difference and a manual match: each side's matched
    amounts by their match's status, signed and absolute, summing to `matched`; a manual
    match made at once (unmatched to manual) and re-examined by an incremental run give
    what a full run counts."""
    d = definition(KEYED, currency=True)
    left = [row("A", 100, cur="USD"), row("B", -250, cur="USD"), row("C", 40, cur="USD")]
    right = [row("A", 100, cur="USD"), row("B", -240, cur="USD"), row("X", 40, cur="USD")]
    tables = [table(d, SideName.LEFT, left), table(d, SideName.RIGHT, right)]
    suggested, differs = "suggested", "matched_with_difference"
    open_ = totals.full(d, tables, [{suggested: [1], differs: [2], UNMATCHED: {3}}] * 2, 2)
    split = {MATCHED: "0.00", differs: "-2.50", suggested: "1.00", "manual": "0.00"}
    assert open_["amounts"]["USD"]["left"] == {
        MATCHED: "-1.50",
        UNMATCHED: "0.40",
        RESOLVED: "0.00",
        SPLIT: split,
    }
    assert open_["absolute_amounts"]["USD"]["left"][SPLIT] == {**split, differs: "2.50"}
    placed = [{suggested: [1], differs: [2], "manual": [3]}] * 2
    matched = totals.full(d, tables, placed, 2)
    third = [
        SideTable.of(side_rows(d, which, rows)[2:])
        for which, rows in ((SideName.LEFT, left), (SideName.RIGHT, right))
    ]
    at_once = open_
    for which, rows in zip(SideName, third, strict=True):
        at_once = totals.moved(d, at_once, which, rows, source=UNMATCHED, target="manual", scale=2)
    incremental = totals.adjusted(
        d,
        open_,
        [(which, rows, 4) for which, rows in zip(SideName, third, strict=True)],
        {which: {3: UNMATCHED} for which in SideName},
        {which: {3: "manual"} for which in SideName},
        2,
    )
    assert at_once == incremental == matched
    for figures in (open_, matched):
        for key in ("amounts", "absolute_amounts"):
            for side in figures[key]["USD"].values():
                total = sum(Decimal(v) for v in side[SPLIT].values())
                assert total == Decimal(side[MATCHED])
    assert totals.kept_split(d, matched)


def test_a_body_error_inside_the_amount_is_named_without_the_forms_tag() -> None:
    side = {"name": "bank", "resource_id": 1, "amount": {"credit": "C", "debit": 3}}
    body = {"name": "n", "left": side, "right": {**side, "name": "b"}, "passes": []}
    with pytest.raises(InvalidBodyError) as found:
        parse_definition(body)
    assert [p.field for p in found.value.problems] == ["left.amount.debit", "right.amount.debit"]
