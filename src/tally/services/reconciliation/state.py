"""One run of the engine: both sides as columns, what is taken, the matches so far.

Rows are held in position order and named inside the engine by their index in that order
(so index order is position order); `taken[i]` is the index of row i's match, or -1.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from itertools import pairwise

from tally.core.reconciliation import (
    MANUAL_PASS_NAME,
    MatchPass,
    MatchStatus,
    Normalizer,
    ReconciliationDefinition,
    SideName,
)
from tally.services.reconciliation import reasons
from tally.services.reconciliation.normalizers import normalized_column
from tally.services.reconciliation.rows import ContentLookup, Match, SideRow

FREE = -1
KeySpec = tuple[tuple[int, tuple[Normalizer, ...]], ...]  # (index in SideRow.keys, normalisers)


class Side:
    """One side's rows as columns, and which of them are taken."""

    __slots__ = (
        "_keys",
        "amounts",
        "days",
        "key_columns",
        "label",
        "positions",
        "rows",
        "taken",
        "which",
    )

    def __init__(
        self, which: SideName, label: str, rows: Sequence[SideRow], key_columns: tuple[str, ...]
    ) -> None:
        self.which = which
        self.label = label  # the definition's side name (`bank`)
        self.key_columns = key_columns
        self.rows = _in_position_order(rows, label)
        self.positions = [row.position for row in self.rows]
        self.amounts = [row.amount for row in self.rows]
        self.days = [row.day for row in self.rows]
        self.taken = [FREE] * len(self.rows)
        self._keys: dict[KeySpec, list[Hashable | None]] = {}

    def keys(self, spec: KeySpec) -> list[Hashable | None]:
        """Each row's key under `spec` (None: empty, equals nothing), computed once per spec."""
        cached = self._keys.get(spec)
        if cached is not None:
            return cached
        if not spec:  # no keys: every row is in one group
            column: list[Hashable | None] = [()] * len(self.rows)
        else:
            parts = [normalized_column([r.keys[i] for r in self.rows], n) for i, n in spec]
            if len(parts) == 1:
                column = list(parts[0])
            else:
                column = [None if None in values else values for values in zip(*parts, strict=True)]
        self._keys[spec] = column
        return column

    def free(self) -> list[int]:
        return [i for i, match in enumerate(self.taken) if match == FREE]


def _in_position_order(rows: Sequence[SideRow], label: str) -> Sequence[SideRow]:
    ordered = all(rows[i].position < rows[i + 1].position for i in range(len(rows) - 1))
    if ordered:
        return rows
    result = sorted(rows, key=lambda row: row.position)
    for before, after in pairwise(result):
        if before.position == after.position:
            raise ValueError(f"{label}: position {after.position} appears twice")
    return result


class Run:
    """The state one `reconcile` call works on."""

    def __init__(
        self,
        definition: ReconciliationDefinition,
        left: Side,
        right: Side,
        *,
        scale: int,
        content: ContentLookup,
        rejected: set[tuple[int, int]],
    ) -> None:
        self.definition = definition
        self.left = left
        self.right = right
        self.scale = scale
        self.content = content
        self.rejected = rejected  # (left position, right position) pairs never to be matched
        self.amounts = definition.left.amount is not None and definition.right.amount is not None
        self.dates = definition.left.date is not None and definition.right.date is not None
        self.matches: list[Match] = []
        # (side, row index) -> (pass index, why a group pass did not take the row)
        self.failures: dict[tuple[SideName, int], tuple[int, str]] = {}
        self._reasons: dict[tuple[object, ...], str] = {}

    def side(self, which: SideName) -> Side:
        return self.left if which is SideName.LEFT else self.right

    def opposite(self, side: Side) -> Side:
        return self.right if side is self.left else self.left

    def spec(self, match_pass: MatchPass, which: SideName) -> KeySpec:
        columns = self.side(which).key_columns
        return tuple(
            (columns.index(pair.left if which is SideName.LEFT else pair.right), pair.normalize)
            for pair in match_pass.keys
        )

    def tolerance(self, match_pass: MatchPass) -> int:
        scaled = match_pass.amount_tolerance.scaleb(self.scale)
        if scaled != scaled.to_integral_value():
            raise ValueError(
                f"tolerance {match_pass.amount_tolerance} has more digits than scale {self.scale}"
            )
        return int(scaled)

    def eligible(self, side: Side, keys: list[Hashable | None]) -> list[int]:
        """The free rows of a side that can match at all in a pass: a key, and an amount and
        a date where the pass compares them."""
        amounts = side.amounts if self.amounts else None
        days = side.days if self.dates else None
        return [
            i
            for i, match in enumerate(side.taken)
            if match == FREE
            and keys[i] is not None
            and (amounts is None or amounts[i] is not None)
            and (days is None or days[i] is not None)
        ]

    def add_match(
        self,
        pass_index: int,
        lefts: Sequence[int],
        rights: Sequence[int],
        note: str | None = None,
    ) -> None:
        """Record a match of rows (indices) made by a pass (-1: manual, with its note)."""
        left, right = self.left, self.right
        difference = self._difference(lefts, rights)
        if pass_index < 0:
            name, status = MANUAL_PASS_NAME, MatchStatus.MANUAL
        else:
            match_pass = self.definition.passes[pass_index]
            name = match_pass.name
            if not match_pass.auto_confirm:
                status = MatchStatus.SUGGESTED
            elif difference:
                status = MatchStatus.MATCHED_WITH_DIFFERENCE
            else:
                status = MatchStatus.MATCHED
        shifts = self._shifts(lefts, rights)
        counts = (len(lefts), len(rights))
        cache_key = (pass_index, difference, shifts, counts, note)
        reason = self._reasons.get(cache_key)
        if reason is None:
            reason = self._reasons[cache_key] = reasons.matched(
                self, pass_index, difference, shifts, counts, note
            )
        index = len(self.matches)
        left_positions = tuple(left.positions[i] for i in lefts)
        self.matches.append(
            Match(
                left_positions[0],
                status,
                name,
                difference,
                reason,
                left_positions,
                tuple(right.positions[i] for i in rights),
            )
        )
        for i in lefts:
            left.taken[i] = index
        for i in rights:
            right.taken[i] = index

    def _difference(self, lefts: Sequence[int], rights: Sequence[int]) -> int | None:
        if not self.amounts:
            return None
        left_amounts = [self.left.amounts[i] for i in lefts]
        right_amounts = [self.right.amounts[i] for i in rights]
        if None in left_amounts or None in right_amounts:
            return None
        return sum(left_amounts) - sum(right_amounts)  # type: ignore[arg-type]

    def _shifts(self, lefts: Sequence[int], rights: Sequence[int]) -> tuple[int, int] | None:
        """The smallest and largest right day minus left day over the match's pairs."""
        if not self.dates:
            return None
        shifts = [
            right_day - left_day
            for left_day in (self.left.days[i] for i in lefts)
            for right_day in (self.right.days[i] for i in rights)
            if left_day is not None and right_day is not None
        ]
        return (min(shifts), max(shifts)) if shifts else None

    def content_keys(self, side: Side, indices: set[int]) -> dict[int, tuple[object, ...]]:
        """Each row's content as a sort key: typed values in column order, empty first."""
        if not indices:
            return {}
        ordered = sorted(indices)
        found = self.content(side.which, [side.positions[i] for i in ordered])
        return {
            i: tuple((value is not None, value) for value in found[side.positions[i]])
            for i in ordered
        }
