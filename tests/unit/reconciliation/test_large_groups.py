"""A one-to-one pass over a key group with many candidate pairs (large_groups.py): the
same pairs as listing and sorting them, without listing them (issue #30)."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any
from unittest.mock import patch

import pytest

from support import reconciliation_cases
from support.reconciliation_cases import as_model, definition, row, run_engine, run_model
from tally.core.reconciliation import ManualWork, Rejection
from tally.services.reconciliation import passes
from tally.services.reconciliation.large_groups import Skips
from tally.services.reconciliation.matching import SideRow, SideTable, reconcile

WIDE = {
    "name": "wide",
    "type": "one_to_one",
    "keys": [{"left": "ref", "right": "ref"}],
    "amount_tolerance": "1000000",
    "date_window": [-36600, 36600],
}


def test_a_group_past_the_bound_is_matched_without_listing_its_pairs() -> None:
    rnd = random.Random(7)
    left = [
        row("K", rnd.randint(0, 40), rnd.randint(0, 9), note=rnd.randint(0, 3)) for _ in range(300)
    ]
    right = [
        row("K", rnd.randint(0, 40), rnd.randint(0, 9), note=rnd.randint(0, 3)) for _ in range(300)
    ]
    d = definition([WIDE])
    with patch.object(passes, "candidate_pairs", side_effect=AssertionError("listed")):
        outcome = run_engine(d, left, right)  # 90,000 pairs: past LISTED_PAIRS
    with patch.object(passes, "LISTED_PAIRS", 10**9):
        listed = run_engine(d, left, right)
    assert outcome == listed
    assert len(outcome.matches) == 300


def test_the_memory_of_a_large_group_grows_with_its_rows_not_its_pairs() -> None:
    """1,000 rows a side sharing one key, every pair a candidate: a million pairs, which
    listed would take well over 100 MB; matched level by level, a few MB (measured by
    tracemalloc: Python's own allocations, the same on every run)."""
    rnd = random.Random(3)
    d = definition([WIDE])
    tables = [
        SideTable.of(
            [SideRow(p, ("K",), rnd.randint(0, 10**6), rnd.randint(0, 400)) for p in range(1, 1001)]
        )
        for _ in range(2)
    ]
    tracemalloc.start()
    try:
        outcome = reconcile(
            d, *tables, ManualWork(), scale=2, content=lambda _, ps: {p: (p,) for p in ps}
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(outcome.matches) == 1000
    assert peak < 16 * 2**20


def test_identical_rows_of_a_large_group_are_taken_by_position() -> None:
    """One cell holding every right row: each left row, in content then position order,
    takes the right row first in that order (the content asked once per row)."""
    asked: list[int] = []
    left = [row("K", 5, 1, note=n % 2) for n in range(200)]
    right = [row("K", 5, 1, note=n % 3) for n in range(150)]
    d = definition([WIDE])
    lookup = reconciliation_cases.content(left, right)

    def counting(which: Any, positions: Any) -> Any:
        asked.extend(positions)
        return lookup(which, positions)

    with patch.object(reconciliation_cases, "content", lambda *_: counting):
        outcome = run_engine(d, left, right)
    assert len(asked) == 350
    with patch.object(passes, "LISTED_PAIRS", 10**9):
        assert outcome == run_engine(d, left, right)
    taken = {m.left[0]: m.right[0] for m in outcome.matches}
    assert set(taken) == {*range(1, 201, 2), *range(2, 101, 2)}  # note 0 first, then 1
    # The right rows by note (0, 1, 2), then position: 50 of each.
    assert (taken[1], taken[3], taken[101], taken[199], taken[2]) == (1, 4, 2, 149, 3)


def test_listed_groups_are_matched_in_batches_of_the_bound() -> None:
    """Key groups of a few pairs each are listed, and matched whenever the pairs listed
    pass the bound: the same pairs as all at once."""
    left = [row(ref, 10, 1, note=n) for ref in "ABC" for n in (1, 0)]
    right = [row(ref, 10, 1) for ref in "ABC"]
    d = definition([{**WIDE, "name": "exact", "amount_tolerance": "0"}])
    with (
        patch.object(passes, "LISTED_PAIRS", 2),
        patch.object(passes, "take_best_pairs", wraps=passes.take_best_pairs) as greedy,
    ):
        outcome = run_engine(d, left, right)
    assert [len(call.args[2]) for call in greedy.call_args_list] == [2, 1]  # groups per batch
    assert [(m.left, m.right) for m in outcome.matches] == [
        ((2,), (1,)),
        ((4,), (2,)),
        ((6,), (3,)),
    ]
    assert outcome == run_engine(d, left, right)


@pytest.mark.parametrize("seed", range(4))
def test_seeded_groups_are_decided_as_the_model_does(seed: int) -> None:
    """Random small groups, every one matched level by level, with rejections, one-sided
    windows, and amounts or dates not compared."""
    rnd = random.Random(seed)
    for _ in range(150):
        d = definition(
            [
                {
                    "name": f"p{n}",
                    "type": "one_to_one",
                    "keys": rnd.choice([[], [{"left": "ref", "right": "ref"}]]),
                    "amount_tolerance": rnd.choice(["0", "0.01", "0.02", "0.04"]),
                    "date_window": rnd.choice([[0, 0], [-2, 2], [1, 3], [-3, -1], [0, 1]]),
                }
                for n in range(rnd.randint(1, 2))
            ],
            amount=rnd.random() < 0.8,
            date=rnd.random() < 0.8,
        )

        def rows() -> list[dict[str, Any]]:
            return [
                row(
                    rnd.choice("AAB"), rnd.randint(-3, 3), rnd.randint(0, 4), note=rnd.randint(0, 1)
                )
                for _ in range(rnd.randint(1, 12))
            ]

        left, right = rows(), rows()
        rejections = tuple(
            Rejection((rnd.randint(1, len(left)),), (rnd.randint(1, len(right)),))
            for _ in range(rnd.randint(0, 3))
        )
        manual = ManualWork((), rejections)
        with patch.object(passes, "LISTED_PAIRS", -1):
            outcome = run_engine(d, left, right, manual)
        assert as_model(outcome) == run_model(d, left, right, manual)


def test_skips_find_the_nearest_kept_index() -> None:
    skips = Skips(5)
    for k in (1, 2, 4):
        skips.remove(k)
    assert [skips.above(k) for k in range(6)] == [0, 3, 3, 3, 5, 5]
    assert [skips.below(k) for k in range(-1, 5)] == [-1, 0, 0, 0, 3, 3]
