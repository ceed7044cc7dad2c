"""The usual case of a one-to-one pass, decided with numpy: keys one row a side has.

In a bank-against-ledger run most keys (a reference) are held by exactly one free row on
each side, and those rows can only be matched to each other. Finding them with dicts
of a million keys, then gathering each pair's values in the dict's random order, was
most of a 1M-row run's first pass (issue #11's benchmark, decision 0016). Here each
key is reduced to Python's own hash, the hashes are sorted and joined by numpy, and
every pair found is checked by comparing the keys themselves (in left-row order, so
the reads run through memory in order): a hash collision is never taken for equal keys.

`split` returns those pairs, and the rows left for the general path (passes.py): every
row whose hash both sides have but not once each, and both rows of a pair whose keys
differ. A row whose hash the other side lacks has no candidate and goes nowhere.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from operator import eq
from typing import Any

import numpy as np
import numpy.typing as npt

Rows = npt.NDArray[np.int64]
key_hash = hash  # the hash keys are joined by (a test makes keys collide through it)
CHECK_ROWS = 100_000  # pairs whose keys are compared at a time


@dataclass(frozen=True)
class Split:
    """Pairs of rows whose key only they have (`lefts[k]` with `rights[k]`, lefts
    ascending), and the rows of each side left to the general path (ascending)."""

    lefts: Rows
    rights: Rows
    left_rest: list[int]
    right_rest: list[int]


def split(
    left_keys: Sequence[Hashable],
    left_rows: Sequence[int],
    right_keys: Sequence[Hashable],
    right_rows: Sequence[int],
) -> Split:
    """The rows of both sides (none with an empty key) split as `Split` says: both
    sides' hashes sorted together once, each run of equal hashes read by its length and
    how many of its rows are left rows."""
    if len(left_rows) == 0 or len(right_rows) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Split(empty, empty, [], [])
    rows = np.concatenate(
        [np.asarray(left_rows, dtype=np.int64), np.asarray(right_rows, dtype=np.int64)]
    )
    hashes = np.concatenate([_hashes(left_keys, left_rows), _hashes(right_keys, right_rows)])
    order = np.argsort(hashes)
    ordered = hashes[order]
    del hashes  # (a million-row side: each of these arrays is tens of megabytes)
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    del ordered
    lengths = np.diff(np.append(starts, len(order)))
    is_left = (order < len(left_rows)).astype(np.int32)  # (left rows come first in `rows`)
    lefts_in_run = np.add.reduceat(is_left, starts)
    del is_left
    both = (lefts_in_run > 0) & (lefts_in_run < lengths)
    once = both & (lengths == 2)
    first, second = order[starts[once]], order[starts[once] + 1]
    left_first = first < len(left_rows)
    lefts = rows[np.where(left_first, first, second)]
    rights = rows[np.where(left_first, second, first)]
    by_left = np.argsort(lefts)
    lefts, rights = lefts[by_left], rights[by_left]
    equal = np.concatenate(
        [
            _equal(
                left_keys, lefts[low : low + CHECK_ROWS], right_keys, rights[low : low + CHECK_ROWS]
            )
            for low in range(0, len(lefts), CHECK_ROWS)
        ]
        or [np.zeros(0, dtype=np.bool_)]
    )
    in_rest = np.repeat(both & ~once, lengths)  # per row, in `order`
    rest = order[in_rest]
    left_rest = rows[rest[rest < len(left_rows)]]
    right_rest = rows[rest[rest >= len(left_rows)]]
    if not equal.all():  # a hash collision: both rows to the general path
        left_rest = np.concatenate([left_rest, lefts[~equal]])
        right_rest = np.concatenate([right_rest, rights[~equal]])
        lefts, rights = lefts[equal], rights[equal]
    return Split(lefts, rights, np.sort(left_rest).tolist(), np.sort(right_rest).tolist())


def _equal(
    left_keys: Sequence[Hashable], lefts: Rows, right_keys: Sequence[Hashable], rights: Rows
) -> npt.NDArray[np.bool_]:
    """Whether each pair's keys are equal (a batch: its rows as Python integers)."""
    pairs = map(left_keys.__getitem__, lefts.tolist()), map(right_keys.__getitem__, rights.tolist())
    return np.fromiter(map(eq, *pairs), dtype=np.bool_, count=len(lefts))


def _hashes(keys: Sequence[Hashable], rows: Sequence[int]) -> npt.NDArray[np.int64]:
    """Each row's key's hash, in the rows' order."""
    row_keys: Any = keys if len(rows) == len(keys) else map(keys.__getitem__, rows)
    return np.fromiter(map(key_hash, row_keys), dtype=np.int64, count=len(rows))
