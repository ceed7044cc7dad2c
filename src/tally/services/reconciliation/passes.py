"""The passes: manual matches, `one_to_one`, and the grouped `one_to_many`/`many_to_one`.

Each pass reads only free rows and records its matches in the run (state.py). Rows are
grouped by key with dicts (each distinct key normalised once); a key shared by one left and
one right row, by far the usual case, is decided without building any candidate list.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Hashable, Sequence
from itertools import compress, repeat
from operator import is_not, ne, sub
from typing import Any

from tally.core.reconciliation import ManualWork, PassType, SideName
from tally.services.reconciliation import reasons
from tally.services.reconciliation.state import Run, Side

Pair = tuple[int, int, int, int]  # (|amount difference|, |date difference|, left, right)


def apply_manual(run: Run, manual: ManualWork) -> None:
    """Manual matches take their rows before any pass (positions no longer in an input
    are left out; a match left without a row on either side is dropped)."""
    for match in sorted(manual.matches, key=lambda m: min(m.left_rows, default=0)):
        lefts = _indices(run.left, match.left_rows)
        rights = _indices(run.right, match.right_rows)
        if lefts and rights:
            run.add_match(-1, lefts, rights, note=match.note)
    run.left.close_taken()
    run.right.close_taken()


def _indices(side: Side, positions: Sequence[int]) -> list[int]:
    """The free rows at these positions (positions are ascending: bisection finds them)."""
    found = []
    for position in sorted(set(positions)):
        i = bisect_left(side.positions, position)
        if i < len(side.positions) and side.positions[i] == position and side.taken[i] < 0:
            found.append(i)
    return found


def _index(
    keys: Sequence[Hashable | None], rows: Sequence[int]
) -> tuple[dict[Hashable | None, int], dict[Hashable | None, list[int]]]:
    """key -> the row with it, for the keys only one row has; key -> its rows (ascending)
    for the keys several rows share. Built with C-level loops: a million rows is usual."""
    row_keys = keys if len(rows) == len(keys) else [keys[i] for i in rows]
    single = dict(zip(row_keys, rows, strict=True))  # the last row wins
    shared: dict[Hashable | None, list[int]] = {}
    if len(single) < len(rows):  # rows not last with their key: the few sharing a key
        earlier = compress(rows, map(ne, map(single.__getitem__, row_keys), rows))
        for i in earlier:
            shared.setdefault(keys[i], []).append(i)
        for key, group in shared.items():
            group.append(single.pop(key))
    return single, shared


def one_to_one(run: Run, pass_index: int) -> None:
    match_pass = run.definition.passes[pass_index]
    left, right = run.left, run.right
    left_keys = left.keys(run.spec(match_pass, SideName.LEFT))
    right_keys = right.keys(run.spec(match_pass, SideName.RIGHT))
    left_single, left_shared = _index(left_keys, run.eligible(left, left_keys))
    right_single, right_shared = _index(right_keys, run.eligible(right, right_keys))
    tolerance = run.tolerance(match_pass)
    window = match_pass.date_window
    groups: list[list[Pair]] = []
    for key in (left_single.keys() | left_shared.keys()) & right_shared.keys() | (
        left_shared.keys() & right_single.keys()
    ):
        pairs = _candidates(
            run,
            left_shared.get(key) or [left_single[key]],
            right_shared.get(key) or [right_single[key]],
            tolerance,
            window,
        )
        if pairs:
            groups.append(pairs)
    found = list(map(left_single.get, right_single))  # each right key's left row, or None
    del left_single
    has_left = list(map(is_not, found, repeat(None)))
    lefts: list[int] = list(compress(found, has_left))  # type: ignore[arg-type]
    rights = list(compress(right_single.values(), has_left))
    del right_single, found, has_left
    _single_pairs(run, pass_index, lefts, rights, tolerance, window)
    if groups:
        _greedy(run, pass_index, groups)
    left.close_taken()
    right.close_taken()


def _single_pairs(
    run: Run,
    pass_index: int,
    lefts: list[int],
    rights: list[int],
    tolerance: int,
    window: tuple[int, int],
) -> None:
    """Match the keys one left row and one right row have, where the pair fits."""
    left, right = run.left, run.right
    count = len(lefts)
    differences: list[Any] = [None] * count
    shifts: list[Any] = [None] * count
    if run.amounts:
        get_left, get_right = left.amounts.__getitem__, right.amounts.__getitem__
        differences = list(map(sub, map(get_left, lefts), map(get_right, rights)))
    if run.dates:
        get_left, get_right = left.days.__getitem__, right.days.__getitem__
        shifts = list(map(sub, map(get_right, rights), map(get_left, lefts)))
    low, high = -tolerance, tolerance
    before, after = window
    fits = [
        (d is None or low <= d <= high) and (s is None or before <= s <= after)
        for d, s in zip(differences, shifts, strict=True)
    ]
    if run.rejected:
        rejected = run.rejected
        fits = [
            fit and (left.positions[i], right.positions[j]) not in rejected
            for fit, i, j in zip(fits, lefts, rights, strict=True)
        ]
    run.pairs(
        pass_index,
        list(compress(lefts, fits)),
        list(compress(rights, fits)),
        list(compress(differences, fits)),
        list(compress(shifts, fits)),
    )


def _candidates(
    run: Run, lefts: list[int], rights: list[int], tolerance: int, window: tuple[int, int]
) -> list[Pair]:
    """Every pair of a key's rows within tolerance and window and not rejected: the right
    rows sorted by amount, each left row's range found by bisection."""
    left, right = run.left, run.right
    before, after = window
    if run.amounts:
        rights = sorted(rights, key=lambda j: right.amounts[j])  # type: ignore[arg-type,return-value]
        right_amounts: list[int] = [right.amounts[j] for j in rights]  # type: ignore[misc]
    pairs: list[Pair] = []
    for i in lefts:
        amount = left.amounts[i]
        near = rights
        if run.amounts:
            assert amount is not None
            low = bisect_left(right_amounts, amount - tolerance)
            near = rights[low : bisect_right(right_amounts, amount + tolerance, low)]
        for j in near:
            shift = right.days[j] - left.days[i] if run.dates else 0  # type: ignore[operator]
            if not before <= shift <= after and run.dates:
                continue
            if run.rejected and (left.positions[i], right.positions[j]) in run.rejected:
                continue
            gap = abs(amount - right.amounts[j]) if run.amounts else 0  # type: ignore[operator]
            pairs.append((gap, abs(shift), i, j))
    return pairs


def _greedy(run: Run, pass_index: int, groups: list[list[Pair]]) -> None:
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
                run.pairs(pass_index, (i,), (j,), *_gaps(run, i, j))


def _gaps(run: Run, i: int, j: int) -> tuple[tuple[int | None], tuple[int | None]]:
    """The amount difference and the date shift of a pair, as `Run.pairs` takes them."""
    left, right = run.left, run.right
    difference = left.amounts[i] - right.amounts[j] if run.amounts else None  # type: ignore[operator]
    shift = right.days[j] - left.days[i] if run.dates else None  # type: ignore[operator]
    return (difference,), (shift,)


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


def grouped(run: Run, pass_index: int) -> None:
    """`one_to_many` (one left row, many right rows) or `many_to_one` (the mirror): the one
    side's row must be the only free row with its keys; its group is every free row of the
    other side with those keys whose date fits, taken whole when the sum fits."""
    match_pass = run.definition.passes[pass_index]
    assert match_pass.keys, "a grouped pass has keys (the definition check refuses none)"
    one_which = SideName.LEFT if match_pass.type is PassType.ONE_TO_MANY else SideName.RIGHT
    one = run.side(one_which)
    many = run.opposite(one)
    one_keys = one.keys(run.spec(match_pass, one.which))
    many_keys = many.keys(run.spec(match_pass, many.which))
    ones = [i for i in one.free() if one_keys[i] is not None]
    one_first, one_shared = _index(one_keys, ones)
    many_first, many_shared = _index(many_keys, run.eligible(many, many_keys))
    for key in (one_first.keys() | one_shared.keys()) & (many_first.keys() | many_shared.keys()):
        members = many_shared.get(key) or [many_first[key]]
        sharing = one_shared.get(key)
        if sharing:
            text = reasons.shared_key(run, pass_index, one, sharing)
            for i in sharing:
                run.failures[one.which, i] = (pass_index, text)
            for j in members:
                run.failures[many.which, j] = (pass_index, text)
            continue
        _group(run, pass_index, one, one_first[key], many, members)
    one.close_taken()
    many.close_taken()


def _group(run: Run, pass_index: int, one: Side, i: int, many: Side, members: list[int]) -> None:
    """Match row `i` of the one side with the members whose date fits, if their sum fits."""
    match_pass = run.definition.passes[pass_index]
    if (run.amounts and one.amounts[i] is None) or (run.dates and one.days[i] is None):
        return  # matches nothing; the reason says which value is empty
    if run.dates:
        before, after = match_pass.date_window
        sign = 1 if one.which is SideName.LEFT else -1  # the window is right minus left
        day = one.days[i]
        members = [j for j in members if before <= sign * (many.days[j] - day) <= after]  # type: ignore[operator]
        if not members:
            return
    lefts, rights = ([i], members) if one.which is SideName.LEFT else (members, [i])
    if run.rejected and any(
        (run.left.positions[a], run.right.positions[b]) in run.rejected
        for a in lefts
        for b in rights
    ):
        text = reasons.rejected_group(run, pass_index, one, i, many, members)
    elif run.amounts and abs(_sum(run.left, lefts) - _sum(run.right, rights)) > run.tolerance(
        match_pass
    ):
        text = reasons.group_sum(run, pass_index, one, i, many, members)
    else:
        run.add_match(pass_index, lefts, rights)
        return
    run.failures[one.which, i] = (pass_index, text)
    for j in members:
        run.failures[many.which, j] = (pass_index, text)


def _sum(side: Side, rows: list[int]) -> int:
    return sum(side.amounts[i] for i in rows)  # type: ignore[misc]
