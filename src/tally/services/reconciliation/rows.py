"""The matching engine's values: a side's rows in, matches and reasons out (matching.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from operator import attrgetter
from typing import Any, NamedTuple

from tally.core.reconciliation import MatchStatus, SideName


class SideRow(NamedTuple):
    """One input row as the engine sees it (a tuple: a million of them per side is cheap)."""

    position: int  # 1-based, in load order (the output's `_row`)
    keys: tuple[str | None, ...]  # the values of `key_columns(definition, side)`, text or None
    amount: int | None  # at the run's common scale (`common_scale`); None when empty
    day: int | None  # date.toordinal() of the side's date (a timestamp's date part)


@dataclass(frozen=True)
class SideTable:
    """One side's rows as the engine takes them: columns in position order. A run reads
    a million rows a side straight into these few lists; a million `SideRow` tuples
    cost more to build than the database took to read them (decision 0016)."""

    positions: Sequence[int]  # ascending
    keys: tuple[Sequence[str | None], ...]  # per key column (`key_columns` order)
    amounts: Sequence[int | None]
    days: Sequence[int | None]

    @classmethod
    def of(cls, rows: Iterable[SideRow], label: str = "side") -> SideTable:
        """The table of rows given one by one, in any order; a position twice is an error."""
        ordered = sorted(rows, key=attrgetter("position"))
        positions = [row.position for row in ordered]
        for before, after in pairwise(positions):
            if before == after:
                raise ValueError(f"{label}: position {after} appears twice")
        width = len(ordered[0].keys) if ordered else 0
        return cls(
            positions,
            tuple([row.keys[k] for row in ordered] for k in range(width)),
            [row.amount for row in ordered],
            [row.day for row in ordered],
        )

    def __len__(self) -> int:
        return len(self.positions)

    def __add__(self, later: SideTable) -> SideTable:
        """This table followed by rows at later positions."""
        if self.positions and later.positions and later.positions[0] <= self.positions[-1]:
            raise ValueError(f"position {later.positions[0]} is not after the table's")
        return SideTable(
            [*self.positions, *later.positions],
            tuple([*a, *b] for a, b in zip(self.keys, later.keys, strict=True)),
            [*self.amounts, *later.amounts],
            [*self.days, *later.days],
        )


class Match(NamedTuple):
    """One match: its rows by position, and why it holds."""

    match_id: int  # the smallest left position
    status: MatchStatus
    pass_name: str  # the pass's name, or MANUAL_PASS_NAME
    difference: int | None  # left amount (or sum) minus right, at the run's scale
    reason: str
    left: tuple[int, ...]  # positions, ascending
    right: tuple[int, ...]


class Outcome(NamedTuple):
    """Every match (by match_id) and, for every row in no match, its reason: unmatched,
    or resolved by an analyst."""

    matches: Sequence[Match]  # ordered by match_id (built as read: a million is usual)
    unmatched_left: Mapping[int, str]  # position -> reason, positions ascending
    unmatched_right: Mapping[int, str]
    resolved_left: Mapping[int, str] = {}  # (never written: a NamedTuple's default)
    resolved_right: Mapping[int, str] = {}


ContentLookup = Callable[[SideName, Sequence[int]], Mapping[int, tuple[Any, ...]]]
"""(side, positions) -> {position: the row's typed values in column order}. Called only to
break a tie that amount and date differences left, in one batch per side and pass."""
