"""key_join.split: the pairs of rows whose key only they have, and what it leaves to the
general path, hash collisions included (Python's hash(-1) == hash(-2))."""

from __future__ import annotations

import pytest

from tally.services.reconciliation import key_join


def test_keys_one_row_a_side_has_are_paired_in_left_order() -> None:
    found = key_join.split(["b", "a", "c"], [0, 1, 2], ["a", "x", "b"], [0, 1, 2])
    assert (found.lefts.tolist(), found.rights.tolist()) == ([0, 1], [2, 0])
    assert (found.left_rest, found.right_rest) == ([], [])  # "c" and "x": no candidate


def test_a_key_several_rows_share_goes_to_the_general_path() -> None:
    found = key_join.split(["a", "a", "b"], [0, 1, 2], ["a", "b", "b", "c"], [0, 1, 2, 3])
    assert (found.lefts.tolist(), found.rights.tolist()) == ([], [])
    assert (found.left_rest, found.right_rest) == ([0, 1, 2], [0, 1, 2])


def test_only_the_rows_asked_for_are_read() -> None:
    keys = ["a", "b", "a", "c"]
    found = key_join.split(keys, [2, 3], ["c", "a"], [0, 1])
    assert (found.lefts.tolist(), found.rights.tolist()) == ([2, 3], [1, 0])


@pytest.mark.parametrize("check_rows", [1, 100_000])
def test_equal_hashes_of_different_keys_are_never_paired(
    monkeypatch: pytest.MonkeyPatch, check_rows: int
) -> None:
    monkeypatch.setattr(key_join, "CHECK_ROWS", check_rows)  # keys compared in batches
    assert hash(-1) == hash(-2)
    found = key_join.split([-1, 5], [0, 1], [5, -2], [0, 1])
    assert (found.lefts.tolist(), found.rights.tolist()) == ([1], [0])
    assert (found.left_rest, found.right_rest) == ([0], [1])
