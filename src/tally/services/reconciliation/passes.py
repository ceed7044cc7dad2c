"""The passes: manual matches and `one_to_one` (the grouped passes are in grouped.py).

Each pass reads only free rows and records its matches in the run (state.py). Rows are
grouped by key with dicts (each distinct key normalised once); a key shared by one left and
one right row, by far the usual case, is decided without building any candidate list.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Iterator, Sequence
from itertools import compress
from operator import ne
from typing import Any

import numpy as np

from tally.core.reconciliation import ManualWork, SideName
from tally.services.reconciliation import key_join
from tally.services.reconciliation.large_groups import LargeGroup
from tally.services.reconciliation.state import FREE, Run, Side

Pair = tuple[int, int, int, int]  # (|amount difference|, |date difference|, left, right)
# The candidate pairs listed at a time: a key group with more is matched by LargeGroup
# (memory by its rows, not its pairs), and the listed groups are matched in batches.
LISTED_PAIRS = 20_000


def apply_manual(run: Run, manual: ManualWork) -> None:
    """Manual matches take their rows before any pass (positions no longer in an input
    are left out; a match left without a row on either side is dropped), then the
    resolutions close theirs (a row a match took stays the match's)."""
    for match in sorted(manual.matches, key=lambda m: min(m.left_rows, default=0)):
        lefts = _indices(run.left, match.left_rows)
        rights = _indices(run.right, match.right_rows)
        if lefts and rights:
            run.add_match(-1, lefts, rights, note=match.note)
    for resolution in manual.resolutions:
        side = run.side(resolution.side)
        for i in _indices(side, resolution.rows):
            run.resolve(side, i, resolution.reason, resolution.note)
    run.left.close_taken()
    run.right.close_taken()


def _indices(side: Side, positions: Sequence[int]) -> list[int]:
    """The free rows at these positions (positions are ascending: bisection finds them)."""
    found = []
    for position in sorted(set(positions)):
        i = bisect_left(side.positions, position)
        if i < len(side.positions) and side.positions[i] == position and side.taken[i] == FREE:
            found.append(i)
    return found


def index_rows(
    keys: Sequence[Hashable | None], rows: Sequence[int]
) -> tuple[dict[Hashable | None, int], dict[Hashable | None, list[int]]]:
    """key -> the row with it, for the keys only one row has; key -> its rows (ascending)
    for the keys several rows share. Built with C-level loops: a million rows is usual."""
    row_keys = keys if len(rows) == len(keys) else list(map(keys.__getitem__, rows))
    single = dict(zip(row_keys, rows, strict=True))  # the last row wins
    shared: dict[Hashable | None, list[int]] = {}
    if len(single) < len(rows):  # rows not last with their key: the few sharing a key
        earlier = compress(rows, map(ne, map(single.__getitem__, row_keys), rows))
        for i in earlier:
            shared.setdefault(keys[i], []).append(i)
        for key, group in shared.items():
            group.append(single.pop(key))
    return single, shared


def shared_keys(
    left_single: dict[Hashable | None, int],
    left_shared: dict[Hashable | None, list[int]],
    right_single: dict[Hashable | None, int],
    right_shared: dict[Hashable | None, list[int]],
) -> Iterator[Hashable | None]:
    """The keys both sides have where at least one side has several rows (few, usually)."""
    for key in right_shared:
        if key in left_single or key in left_shared:
            yield key
    for key in left_shared:
        if key in right_single:
            yield key


def one_to_one(run: Run, pass_index: int) -> None:
    match_pass = run.definition.passes[pass_index]
    left, right = run.left, run.right
    left_keys = left.keys(run.spec(match_pass, SideName.LEFT))
    right_keys = right.keys(run.spec(match_pass, SideName.RIGHT))
    found = key_join.split(
        left_keys, run.eligible(left, left_keys), right_keys, run.eligible(right, right_keys)
    )
    left_single, left_shared = index_rows(left_keys, found.left_rest)
    right_single, right_shared = index_rows(right_keys, found.right_rest)
    tolerance = run.tolerance(match_pass)
    window = match_pass.date_window
    # The rest's keys one row a side has (a hash collision's rows only, as split
    # leaves the rest), with split's pairs.
    lefts, rights = found.lefts, found.rights
    rest = [(i, right_single[key]) for key, i in left_single.items() if key in right_single]
    if rest:
        lefts = np.concatenate([lefts, np.array([i for i, _ in rest], dtype=np.int64)])
        rights = np.concatenate([rights, np.array([j for _, j in rest], dtype=np.int64)])
    _single_pairs(run, pass_index, lefts, rights, tolerance, window)
    groups: list[list[Pair]] = []
    listed = 0
    for key in shared_keys(left_single, left_shared, right_single, right_shared):
        group_lefts = left_shared.get(key) or [left_single[key]]
        group_rights = right_shared.get(key) or [right_single[key]]
        if _most_pairs(run, group_lefts, group_rights, tolerance, window) > LISTED_PAIRS:
            LargeGroup(run, pass_index, group_lefts, group_rights, tolerance, window).match()
            continue
        pairs = candidate_pairs(run, group_lefts, group_rights, tolerance, window)
        if pairs:
            groups.append(pairs)
            listed += len(pairs)
        if listed > LISTED_PAIRS:
            take_best_pairs(run, pass_index, groups)
            groups, listed = [], 0
    if groups:
        take_best_pairs(run, pass_index, groups)
    left.close_taken()
    right.close_taken()


def _single_pairs(
    run: Run,
    pass_index: int,
    lefts: key_join.Rows,
    rights: key_join.Rows,
    tolerance: int,
    window: tuple[int, int],
) -> None:
    """Match the pairs of rows whose key only they have, where the pair fits: each
    test made on every pair at once (numpy)."""
    left, right = run.left, run.right
    fits = np.ones(len(lefts), dtype=np.bool_)
    differences: Any = None
    shifts: Any = None
    if run.amounts:
        differences = left.numbers(days=False)[lefts] - right.numbers(days=False)[rights]
        fits &= (np.abs(differences) <= tolerance).astype(np.bool_)
    if run.dates:
        shifts = right.numbers(days=True)[rights] - left.numbers(days=True)[lefts]
        before, after = window
        fits &= (before <= shifts) & (shifts <= after)
    if run.rejected:
        rejected, left_at, right_at = run.rejected, left.positions, right.positions
        fits &= np.fromiter(
            (
                (left_at[i], right_at[j]) not in rejected
                for i, j in zip(lefts.tolist(), rights.tolist(), strict=True)
            ),
            dtype=np.bool_,
            count=len(lefts),
        )
    run.pairs(
        pass_index,
        lefts[fits],
        rights[fits],
        None if differences is None else differences[fits],
        None if shifts is None else shifts[fits],
    )


def _most_pairs(
    run: Run, lefts: list[int], rights: list[int], tolerance: int, window: tuple[int, int]
) -> int:
    """How many candidate pairs a key group has at most: the fewer of those within the
    tolerance and those within the window, counted by bisection without listing them."""
    counts = [len(lefts) * len(rights)]
    if run.amounts:
        counts.append(
            _within(run.left.amounts, run.right.amounts, lefts, rights, -tolerance, tolerance)
        )
    if run.dates:
        counts.append(_within(run.left.days, run.right.days, lefts, rights, *window))
    return min(counts)


def _within(
    mine: Sequence[Any],
    theirs: Sequence[Any],
    lefts: list[int],
    rights: list[int],
    low: int,
    high: int,
) -> int:
    """How many (left, right) pairs have low <= right value - left value <= high."""
    values = sorted(theirs[j] for j in rights)
    return sum(
        bisect_right(values, mine[i] + high) - bisect_left(values, mine[i] + low) for i in lefts
    )


def candidate_pairs(
    run: Run, lefts: list[int], rights: list[int], tolerance: int, window: tuple[int, int]
) -> list[Pair]:
    """Every pair of a key's rows within tolerance and window and not rejected. The right
    rows are sorted by amount (by date when amounts are not compared) and each left row's
    range is found by bisection, so a pass without keys does not try every pair."""
    left, right = run.left, run.right
    before, after = window
    by: Sequence[Any] | None = right.amounts if run.amounts else right.days if run.dates else None
    if by is not None:
        rights = sorted(rights, key=by.__getitem__)
        values = [by[j] for j in rights]
    pairs: list[Pair] = []
    for i in lefts:
        near = rights
        if run.amounts:
            amount: int = left.amounts[i]  # type: ignore[assignment]
            low = bisect_left(values, amount - tolerance)
            near = rights[low : bisect_right(values, amount + tolerance, low)]
        elif run.dates:
            day: int = left.days[i]  # type: ignore[assignment]
            low = bisect_left(values, day + before)
            near = rights[low : bisect_right(values, day + after, low)]
        for j in near:
            shift = right.days[j] - left.days[i] if run.dates else 0  # type: ignore[operator]
            if run.dates and not before <= shift <= after:
                continue
            if run.rejected and (left.positions[i], right.positions[j]) in run.rejected:
                continue
            gap = abs(left.amounts[i] - right.amounts[j]) if run.amounts else 0  # type: ignore[operator]
            pairs.append((gap, abs(shift), i, j))
    return pairs


def take_best_pairs(run: Run, pass_index: int, groups: list[list[Pair]]) -> None:
    """Take the pairs best first (amount gap, date gap, then content), each row once.
    Content is looked up only for pairs tied on both gaps that share a row."""
    tied_left: set[int] = set()
    tied_right: set[int] = set()
    for pairs in groups:
        pairs.sort()
        for run_of_ties in _ties(pairs):
            lefts = [p[2] for p in run_of_ties]
            rights = [p[3] for p in run_of_ties]
            if len(set(lefts)) < len(lefts) or len(set(rights)) < len(rights):
                tied_left.update(lefts)
                tied_right.update(rights)
    left_content = run.content_keys(run.left, tied_left)
    right_content = run.content_keys(run.right, tied_right)
    left_taken, right_taken = run.left.taken, run.right.taken
    for pairs in groups:
        if left_content or right_content:
            pairs.sort(
                key=lambda p: (
                    p[0],
                    p[1],
                    left_content.get(p[2], ()),
                    right_content.get(p[3], ()),
                    p[2],
                    p[3],
                )
            )
        for _, _, i, j in pairs:
            if left_taken[i] < 0 and right_taken[j] < 0:
                run.pair(pass_index, i, j)


def _ties(pairs: list[Pair]) -> list[list[Pair]]:
    """The runs of two or more sorted pairs with equal amount and date gaps."""
    runs: list[list[Pair]] = []
    start = 0
    for end in range(1, len(pairs) + 1):
        if end == len(pairs) or pairs[end][:2] != pairs[start][:2]:
            if end - start > 1:
                runs.append(pairs[start:end])
            start = end
    return runs
