"""The matching engine: two sides' rows and a definition in, matches and reasons out.

A pure function (no database, no I/O), so the runs, the incremental path and the tests
all call the same code. `reconcile` takes each side's rows as a `SideTable` (columns of
positions, key values, amounts as integers at the run's common scale, dates as day
ordinals; `SideTable.of` makes one of `SideRow`s), the
analysts' manual work, and a `content` lookup that gives a row's own typed values; it
returns every match and a reason for every unmatched row.

The rules (issue #11, section 1), in the order they apply:

1. Manual matches first: their rows are taken out of every pass (status `manual`,
   pass `manual`). A rejection means the engine never pairs any of its left rows with
   any of its right rows again.
2. Passes in order; a row matched in one pass is taken by no later pass. Keys must be
   equal after the pass's normalisers (normalizers.py); an empty key equals nothing.
   When both sides name an amount, a pass compares amounts: |left - right| (a group's
   sum) <= tolerance, and a row with an empty amount matches nothing there. When both
   sides name a date, right day - left day must lie in the window [before, after] for
   every member of a group, and a row with an empty date matches nothing there. When
   both sides name a currency, it is part of every pass's key (a pass without keys
   groups rows by currency): rows of two currencies never match, and a row whose
   currency is empty matches nothing.
3. `one_to_one`: among the candidate pairs of a key (equal keys, within tolerance and
   window, not rejected) the greedy global order decides: smallest |amount difference|,
   then smallest |date difference|, then the left row's content, then the right row's
   (typed values in column order, empty first), then (for rows whose content is
   identical, hence interchangeable) their positions. Never arrival order.
4. `one_to_many`: a left row that is the only still-unmatched left row with its keys takes
   every still-unmatched right row with those keys whose date fits, as one group, when the
   group's sum is within tolerance: all of them or none. Two left rows sharing the keys:
   neither matches in that pass. `many_to_one` mirrors it.
5. Status: `suggested` when the pass does not auto-confirm, else `matched_with_difference`
   when the difference (left amount or sum minus right amount or sum) is not zero, else
   `matched`. The match's id is its smallest left position.

The outcome does not depend on the order of the input sequences (rows are put in position
order first, and every choice is made by the rules above). explain.py says which pass and
which candidate explain an unmatched row; reasons.py words every reason.

A million matches is the usual case, so the outcome's `matches` are built as they are read
(`Matches`), and `output_rows` gives the output's rows in its order without building them.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import ge
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from tally.core.reconciliation import (
    ManualWork,
    MatchStatus,
    PassType,
    ReconciliationDefinition,
    SideName,
)
from tally.services.reconciliation.explain import unmatched
from tally.services.reconciliation.grouped import grouped
from tally.services.reconciliation.passes import apply_manual, one_to_one
from tally.services.reconciliation.rows import ContentLookup, Match, Outcome, SideRow, SideTable
from tally.services.reconciliation.state import Run, Side

__all__ = [
    "ContentLookup",
    "Match",
    "Matches",
    "Outcome",
    "OutputColumns",
    "OutputRow",
    "SideRow",
    "SideTable",
    "key_columns",
    "output_rows",
    "reconcile",
]


def key_columns(definition: ReconciliationDefinition, side: SideName) -> tuple[str, ...]:
    """The distinct columns the passes use as keys on one side, in order of first use,
    after the side's currency column when both sides name one (every pass keys by it):
    the order of `SideRow.keys` and `SideTable.keys`."""
    seen: dict[str, None] = {}
    if definition.currencies:
        seen[definition.side(side).currency] = None  # type: ignore[index]
    for match_pass in definition.passes:
        for pair in match_pass.keys:
            seen.setdefault(pair.left if side is SideName.LEFT else pair.right, None)
    return tuple(seen)


def reconcile(
    definition: ReconciliationDefinition,
    left: SideTable,
    right: SideTable,
    manual: ManualWork,
    *,
    scale: int,
    content: ContentLookup,
) -> Outcome:
    """Match `left` against `right` by the definition's passes, after the manual work."""
    rejected = {
        (left_row, right_row)
        for rejection in manual.rejections
        for left_row in rejection.left_rows
        for right_row in rejection.right_rows
    }
    sides = [
        Side(
            which,
            definition.side(which).name,
            table,
            key_columns(definition, which),
            definition.side(which).currency if definition.currencies else None,
        )
        for which, table in ((SideName.LEFT, left), (SideName.RIGHT, right))
    ]
    run = Run(
        definition,
        *sides,
        scale=scale,
        content=content,
        rejected=rejected,
    )
    apply_manual(run, manual)
    for index, match_pass in enumerate(definition.passes):
        if match_pass.type is PassType.ONE_TO_ONE:
            one_to_one(run, index)
        else:
            grouped(run, index)
    unmatched_left, unmatched_right = unmatched(run)
    resolved = run.resolved_reasons(run.left), run.resolved_reasons(run.right)
    matches = Matches(run)
    run.release()
    return Outcome(matches, unmatched_left, unmatched_right, *resolved)


OutputRow = tuple[int | None, MatchStatus, str | None, int | None, str, int | None, int | None]
"""match_id, status, pass name, difference, reason, left position, right position."""
ROWS_PER_STEP = 50_000  # rows OutputColumns turns into Python values at a time


def _positions(positions: Sequence[int]) -> npt.NDArray[np.int64]:
    if isinstance(positions, range):
        return np.arange(positions.start, positions.stop, positions.step, dtype=np.int64)
    return np.asarray(positions, dtype=np.int64)


@dataclass(frozen=True)
class OutputColumns:
    """The output's rows as columns: match id, left and right position (0: empty), and
    an index into `entries`, the distinct (pass name, status, difference, reason)."""

    match_ids: npt.NDArray[np.int64]
    entries_at: npt.NDArray[np.int64]
    left: npt.NDArray[np.int64]
    right: npt.NDArray[np.int64]
    entries: list[tuple[str | None, MatchStatus, int | None, str]]

    def __len__(self) -> int:
        return len(self.match_ids)

    def rows(self) -> Iterator[OutputRow]:
        """The rows as `OutputRow`s (a batch at a time: see `batches`)."""
        for _, values in self.batches():
            yield from zip(*values, strict=True)

    def batches(self) -> Iterator[tuple[slice, list[Sequence[Any]]]]:
        """Each batch's slice of the rows and its columns as Python values, in
        `OutputRow`'s order: a million rows never exist as Python values at once."""
        if self.entries:
            names, statuses, differences, reasons = map(list, zip(*self.entries, strict=True))
        for low in range(0, len(self), ROWS_PER_STEP):
            part = slice(low, min(low + ROWS_PER_STEP, len(self)))
            at = self.entries_at[part].tolist()
            yield (
                part,
                [
                    or_none(self.match_ids[part]),
                    list(map(statuses.__getitem__, at)),
                    list(map(names.__getitem__, at)),
                    list(map(differences.__getitem__, at)),
                    list(map(reasons.__getitem__, at)),
                    or_none(self.left[part]),
                    or_none(self.right[part]),
                ],
            )


def or_none(values: npt.NDArray[np.int64]) -> list[int | None]:
    """The values as Python integers, 0 as None."""
    out = values.astype(object)
    out[values == 0] = None
    return out.tolist()  # type: ignore[no-any-return]


UNMATCHED = MatchStatus.UNMATCHED
RESOLVED = MatchStatus.RESOLVED


def output_rows(outcome: Outcome) -> Iterator[OutputRow]:
    """The output's rows in its order, as the issue lays them out: one row per (left row,
    right row) pair of a match and one per unmatched row; left positions ascending (a
    match's right rows ascending within), then the unmatched right rows by position. The
    fast way to write the output: no `Match` object is built."""
    if not isinstance(outcome.matches, Matches):
        raise TypeError("output_rows takes an Outcome that reconcile returned")
    return outcome.matches.output_rows(outcome)


def output_columns(outcome: Outcome) -> OutputColumns:
    """`output_rows` as numpy columns (`Matches.output_columns`)."""
    if not isinstance(outcome.matches, Matches):
        raise TypeError("output_columns takes an Outcome that reconcile returned")
    return outcome.matches.output_columns(outcome)


class Matches(Sequence[Match]):
    """The run's matches by match_id, each `Match` built when read: the run keeps them as
    integer arrays, so a million matches cost tens of megabytes, not hundreds."""

    def __init__(self, run: Run) -> None:
        self._run = run
        taken = run.left.taken  # left rows in position order: matches in match_id order
        order: Iterable[int] = compress(taken, map(ge, taken, repeat(0)))
        if any(len(lefts) > 1 for lefts, _ in run.groups.values()):  # once per match
            first_left = run.match_left
            order = (m for i, m in enumerate(taken) if m >= 0 and first_left[m] == i)
        self._order = array("q", order)

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> Match: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Match]: ...

    def __getitem__(self, index: int | slice) -> Match | Sequence[Match]:
        if isinstance(index, slice):
            return [self._match(m) for m in self._order[index]]
        return self._match(self._order[index])

    def __iter__(self) -> Iterator[Match]:
        return map(self._match, self._order)

    def _match(self, m: int) -> Match:
        run = self._run
        if m in run.groups:
            return run.match(m)
        name, status, difference, reason = run.entries[run.match_entry[m]]
        left = run.left.positions[run.match_left[m]]
        right = (run.right.positions[run.match_right[m]],)
        return tuple.__new__(Match, (left, status, name, difference, reason, (left,), right))

    def per_status(self) -> dict[MatchStatus, int]:
        """How many matches of each status, counted from the run's arrays (no `Match`
        built)."""
        run = self._run
        per_entry = Counter(map(run.match_entry.__getitem__, self._order))
        counts: Counter[MatchStatus] = Counter()
        for entry, n in per_entry.items():
            counts[run.entries[entry][1]] += n
        return dict(counts)

    def positions(self, which: SideName, status: MatchStatus) -> list[int]:
        """One side's rows in a match of this status, ascending, found from the run's
        arrays (no `Match` built: last_run's amounts per status, totals.py)."""
        run = self._run
        side = run.left if which is SideName.LEFT else run.right
        taken = side.taken_array()
        rows = np.flatnonzero(taken >= 0)
        if not len(rows):
            return []
        of_entry = np.array([entry[1] == status for entry in run.entries], dtype=bool)
        entries = np.frombuffer(run.match_entry, dtype=np.int64)
        found: list[int] = _positions(side.positions)[rows[of_entry[entries[taken[rows]]]]].tolist()
        return found

    def pairs(self) -> int:
        """How many output rows the matches give: one per (left row, right row) pair."""
        groups = self._run.groups.values()
        return len(self) - len(groups) + sum(len(lefts) * len(rights) for lefts, rights in groups)

    def output_rows(self, outcome: Outcome) -> Iterator[OutputRow]:
        """See `output_rows`: `output_columns`' rows, a batch of columns at a time."""
        return self.output_columns(outcome).rows()

    def output_columns(self, outcome: Outcome) -> OutputColumns:
        """The output's rows in its order (see `output_rows`) as numpy columns, built
        from the run's arrays without a Python step per row: each left row gives one row,
        or one per right row of its match where that has several, then each right row in
        no match (unmatched or resolved) gives one."""
        run = self._run
        unmatched_left, resolved_left = outcome.unmatched_left, outcome.resolved_left
        unmatched_right = outcome.unmatched_right
        if outcome.resolved_right:  # (few: merged in position order)
            unmatched_right = {**unmatched_right, **outcome.resolved_right}
            unmatched_right = {p: unmatched_right[p] for p in sorted(unmatched_right)}
        taken = run.left.taken_array()
        repeats = np.ones(len(taken), dtype=np.int64)
        spread = [(lefts, rights) for lefts, rights in run.groups.values() if len(rights) > 1]
        for lefts, rights in spread:
            repeats[list(lefts)] = len(rights)
        match = np.repeat(taken, repeats)
        free = match < 0
        match[free] = 0  # (any match: its values are replaced below)
        first_left, first_right, entry_of = (
            np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(1, dtype=np.int64)
            for a in (run.match_left, run.match_right, run.match_entry)
        )
        left_positions = _positions(run.left.positions)
        right_positions = _positions(run.right.positions)
        right = first_right[match]
        starts = np.cumsum(repeats) - repeats  # each left row's first output row
        for lefts, rights in spread:
            for i in lefts:
                right[starts[i] : starts[i] + len(rights)] = rights
        entries = len(run.entries)
        entry = entry_of[match]
        entry[free] = np.arange(entries, entries + int(free.sum()))
        match_ids = left_positions[first_left[match]]
        match_ids[free] = 0
        right_column = right_positions[right] if len(right_positions) else right
        right_column[free] = 0
        unmatched = [
            (None, RESOLVED, None, resolved_left[p])
            if p in resolved_left
            else (None, UNMATCHED, None, unmatched_left[p])
            for p in left_positions[taken < 0].tolist()
        ]
        resolved_right = outcome.resolved_right
        later = np.fromiter(unmatched_right, dtype=np.int64, count=len(unmatched_right))
        return OutputColumns(
            np.concatenate([match_ids, np.zeros_like(later)]),
            np.concatenate([entry, np.arange(len(later)) + entries + len(unmatched)]),
            np.concatenate(
                [np.repeat(left_positions, repeats), np.zeros(len(later), dtype=np.int64)]
            ),
            np.concatenate([right_column, later]),
            [
                *run.entries,
                *unmatched,
                *(
                    (None, RESOLVED if p in resolved_right else UNMATCHED, None, reason)
                    for p, reason in unmatched_right.items()
                ),
            ],
        )

    def state(self, outcome: Outcome) -> Iterator[object]:
        """What `output_rows` is computed from, part by part: the rows' positions, the
        match each row is in, each match's rows, entry and group, the entries and the
        unmatched rows' reasons. The engine is deterministic, so equal inputs and work give
        equal parts, and equal parts give equal rows: a run's digest is taken over these
        (a few arrays' bytes) instead of over a million rows."""
        run = self._run
        for side in (run.left, run.right):
            yield array("q", side.positions).tobytes()
            yield side.taken.tobytes()
        yield run.match_left.tobytes()
        yield run.match_right.tobytes()
        yield run.match_entry.tobytes()
        yield sorted(run.groups.items())
        yield run.entries
        for rows in outcome[1:]:  # unmatched, then resolved, left then right
            yield list(rows.items())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Matches({list(self)!r})"
