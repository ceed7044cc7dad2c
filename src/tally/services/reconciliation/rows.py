"""The matching engine's values: a side's rows in, matches and reasons out (matching.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from tally.core.reconciliation import MatchStatus, SideName


class SideRow(NamedTuple):
    """One input row as the engine sees it (a tuple: a million of them per side is cheap)."""

    position: int  # 1-based, in load order (the output's `_row`)
    keys: tuple[str | None, ...]  # the values of `key_columns(definition, side)`, text or None
    amount: int | None  # at the run's common scale (`common_scale`); None when empty
    day: int | None  # date.toordinal() of the side's date (a timestamp's date part)


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
    """Every match (by match_id) and, for every row in no match, its reason."""

    matches: Sequence[Match]  # ordered by match_id (built as read: a million is usual)
    unmatched_left: Mapping[int, str]  # position -> reason, positions ascending
    unmatched_right: Mapping[int, str]


ContentLookup = Callable[[SideName, Sequence[int]], Mapping[int, tuple[Any, ...]]]
"""(side, positions) -> {position: the row's typed values in column order}. Called only to
break a tie that amount and date differences left, in one batch per side and pass."""
