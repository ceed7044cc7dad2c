"""One run of the engine: both sides as columns, what is taken, the matches so far.

Rows are held in position order and named inside the engine by their index in that order
(so index order is position order). Matches are kept compact (a million of them is the
usual case): three integer arrays (first left row, first right row, entry), where an entry
is one distinct (pass, status, difference, reason) shared by every match it describes, and
the rows of the few matches with more than one row on a side in `groups`.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence
from itertools import compress, count, islice, repeat
from operator import is_, lt
from typing import Any

import numpy as np
import numpy.typing as npt

from tally.core.reconciliation import (
    MANUAL_PASS_NAME,
    MatchPass,
    MatchStatus,
    Normalizer,
    ReconciliationDefinition,
    SideName,
    currency_code,
)
from tally.services.reconciliation import reasons
from tally.services.reconciliation.normalizers import normalized_column
from tally.services.reconciliation.rows import ContentLookup, Match, SideTable

FREE = -1
RESOLVED = -2  # `taken` of a row an analyst closed with no counterpart (no match)


KeySpec = tuple[tuple[int, tuple[Normalizer, ...]], ...]  # (index in SideTable.keys, normalisers)
Numbers = npt.NDArray[Any]  # int64, or object for integers past 2**62 (Side.numbers)
Entry = tuple[str, MatchStatus, int | None, str]  # pass name, status, difference, reason


class Side:
    """One side's rows as columns, and which of them are taken (`taken[i]`: match or -1).
    `currencies`: each row's currency code (`currency_code`), when the run matches within
    currencies, else None."""

    __slots__ = (
        "_keys",
        "_numbers",
        "amounts",
        "currencies",
        "days",
        "key_columns",
        "key_values",
        "label",
        "open",
        "positions",
        "taken",
        "which",
    )

    def __init__(
        self,
        which: SideName,
        label: str,
        table: SideTable,
        key_columns: tuple[str, ...],
        currency: str | None = None,
    ) -> None:
        self.which = which
        self.label = label  # the definition's side name (`bank`)
        self.key_columns = key_columns
        # A full run's positions are a range: ascending without a look at each.
        ascending = isinstance(table.positions, range) and table.positions.step > 0
        if not ascending and not all(map(lt, table.positions, islice(table.positions, 1, None))):
            raise ValueError(f"{label}: positions are not ascending")
        self.positions: Sequence[int] = table.positions
        self.key_values: tuple[Sequence[str | None], ...] = table.keys
        self.amounts: Sequence[int | None] = table.amounts
        self.days: Sequence[int | None] = table.days
        self.currencies: Sequence[str | None] | None = None
        if currency is not None:  # (a table of no rows may have no key columns)
            raw = table.keys[key_columns.index(currency)] if self.positions else []
            codes = {value: currency_code(value) for value in set(raw)}  # (a few distinct)
            self.currencies = list(map(codes.__getitem__, raw))
        self.taken = array("q", [FREE]) * len(self.positions)
        # The free rows a pass may still take (see Run.__init__); shrinks after each pass
        # (close_taken), which usually leaves a few percent of them.
        self.open: Sequence[int] = list(range(len(self.positions)))
        self._keys: dict[tuple[KeySpec, bool], Sequence[Hashable | None]] = {}
        self._numbers: dict[bool, Numbers] = {}

    def keys(self, spec: KeySpec, *, currency: bool = True) -> Sequence[Hashable | None]:
        """Each row's key under `spec` (None: empty, equals nothing), computed once per spec.
        Where the run matches within currencies the currency is part of every key (a pass
        without keys groups rows by currency), unless `currency` is false (explain.py
        finds candidates across currencies, to say when the currency is what differs)."""
        cached = self._keys.get((spec, currency))
        if cached is not None:
            return cached
        column: Sequence[Hashable | None]
        if currency and self.currencies is not None:
            plain = self.keys(spec, currency=False)
            pairs: list[Hashable | None] = list(zip(self.currencies, plain, strict=True))
            for values in (self.currencies, plain):  # an empty part: no key (C-level scans)
                if None in values:
                    for k in compress(count(), map(is_, values, repeat(None))):
                        pairs[k] = None
            column = pairs
        elif not spec or not self.positions:  # no keys: every row is in one group
            column = [()] * len(self.positions)
        else:  # (a table of no rows may have no key columns: SideTable.of([]))
            parts = [normalized_column(list(self.key_values[i]), n) for i, n in spec]
            if len(parts) == 1:
                column = parts[0]
            else:
                column = [None if None in values else values for values in zip(*parts, strict=True)]
        self._keys[spec, currency] = column
        return column

    def numbers(self, *, days: bool) -> Numbers:
        """The amounts (or the days) as a numpy array, for comparing many pairs at once:
        int64 when every value is within 2**62 (so a difference cannot overflow), else
        Python integers (object); an empty value is 0 (no pass compares it: a row with an
        empty compared value is never open)."""
        cached = self._numbers.get(days)
        if cached is not None:
            return cached
        values = self.days if days else self.amounts
        plain = [0 if v is None else v for v in values] if None in values else values
        try:
            numbers = np.array(plain, dtype=np.int64)
            if len(numbers) and max(-int(numbers.min()), int(numbers.max())) > 2**62:
                raise OverflowError
        except OverflowError:
            numbers = np.array(plain, dtype=object)
        self._numbers[days] = numbers
        return numbers

    def free(self) -> list[int]:
        """Every row in no match."""
        return np.flatnonzero(self.taken_array() == FREE).tolist()

    def release(self) -> None:
        """Keep only the positions and the taken marks (see Run.release)."""
        self.key_values, self.amounts, self.days, self.open = (), (), (), ()
        self.currencies = None
        self._keys.clear()
        self._numbers.clear()

    def close_taken(self) -> None:
        """Drop the rows a pass took from `open` (numpy: a million rows is usual)."""
        rows = np.asarray(self.open, dtype=np.int64)
        self.open = rows[self.taken_array()[rows] == FREE].tolist()

    def taken_array(self) -> npt.NDArray[np.int64]:
        """`taken` as a numpy array sharing its memory: writes go to `taken`."""
        return np.frombuffer(self.taken, dtype=np.int64)


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
        self.currencies = left.currencies is not None and right.currencies is not None
        self.match_left = array("q")  # per match: its first (smallest) left row
        self.match_right = array("q")
        self.match_entry = array("q")
        self.groups: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self.entries: list[Entry] = []
        self._entry_ids: dict[tuple[object, ...], int] = {}
        # (side, row index) -> (pass index, why a group pass did not take the row)
        self.failures: dict[tuple[SideName, int], tuple[int, str]] = {}
        # per side: row index -> (reason code, reason text) of the rows analysts resolved
        self.resolved: dict[SideName, dict[int, tuple[str, str]]] = {s: {} for s in SideName}
        for side in (left, right):  # a row with an empty compared value matches in no pass
            if self.amounts and None in side.amounts:
                side.open = [i for i in side.open if side.amounts[i] is not None]
            if self.dates and None in side.days:
                side.open = [i for i in side.open if side.days[i] is not None]
            if side.currencies is not None and None in side.currencies:
                codes = side.currencies
                side.open = [i for i in side.open if codes[i] is not None]

    def release(self) -> None:
        """Drop what only matching and explaining needed (key columns, amounts, dates):
        the outcome keeps the run for its matches while the output is written."""
        self.left.release()
        self.right.release()
        self.failures.clear()

    def resolve(self, side: Side, i: int, code: str, note: str | None) -> None:
        """Row i of the side closed by an analyst: taken by no pass, status `resolved`."""
        side.taken[i] = RESOLVED
        self.resolved[side.which][i] = (code, reasons.resolved(code, note))

    def resolved_reasons(self, side: Side) -> dict[int, str]:
        """The side's resolved rows: position -> reason, positions ascending."""
        found = self.resolved[side.which]
        return {side.positions[i]: found[i][1] for i in sorted(found)}

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

    def eligible(self, side: Side, keys: Sequence[Hashable | None]) -> Sequence[int]:
        """The rows a pass may take on a side: open (free, and with an amount and a date
        where compared) and with a key."""
        if len(side.open) == len(keys) and None not in keys:
            return side.open
        return [i for i in side.open if keys[i] is not None]

    def pairs(
        self,
        pass_index: int,
        lefts: npt.NDArray[np.int64],
        rights: npt.NDArray[np.int64],
        differences: Numbers | None,
        shifts: Numbers | None,
    ) -> None:
        """Record one-to-one matches: lefts[k] with rights[k], whose amount difference and
        date shift (right minus left) are given, None where not compared. Arrays: the
        first pass records a million pairs, never as Python integers."""
        count = len(lefts)
        if not count:
            return
        columns = (differences, shifts)
        same = all(c is None or bool((c == c[0]).all()) for c in columns)
        # Each pair's (difference, shift), or the one they all share (the usual first
        # pass: every pair equal in amount and date); a column not compared is None (an
        # endless repeat: zip is not strict).
        values = [repeat(None) if c is None else (c[:1] if same else c).tolist() for c in columns]
        found = array("q")
        for difference, shift in islice(zip(*values, strict=False), 1 if same else count):
            entry = self._entry_ids.get((pass_index, difference, shift))
            if entry is None:
                both = None if shift is None else (shift, shift)
                entry = self._entry(pass_index, difference, both, (1, 1), None)
                self._entry_ids[pass_index, difference, shift] = entry
            found.append(entry)
        entries = found * count if same else found
        start = len(self.match_entry)
        self.match_left.frombytes(lefts.astype(np.int64).tobytes())
        self.match_right.frombytes(rights.astype(np.int64).tobytes())
        self.match_entry.extend(entries)
        numbers = np.arange(start, start + count, dtype=np.int64)
        self.left.taken_array()[lefts] = numbers
        self.right.taken_array()[rights] = numbers

    def pair(self, pass_index: int, i: int, j: int) -> None:
        """Record one one-to-one match: left row i with right row j."""
        left, right = self.left, self.right
        difference = left.amounts[i] - right.amounts[j] if self.amounts else None  # type: ignore[operator]
        shift = right.days[j] - left.days[i] if self.dates else None  # type: ignore[operator]
        self.pairs(
            pass_index,
            np.array([i], dtype=np.int64),
            np.array([j], dtype=np.int64),
            None if difference is None else np.array([difference], dtype=object),
            None if shift is None else np.array([shift], dtype=object),
        )

    def add_match(
        self,
        pass_index: int,
        lefts: Sequence[int],
        rights: Sequence[int],
        note: str | None = None,
    ) -> None:
        """Record a match of rows (indices, ascending) by a pass (-1: manual, with its note)."""
        difference = self._difference(lefts, rights)
        shifts = self._shifts(lefts, rights)
        counts = (len(lefts), len(rights))
        entry = self._entry(pass_index, difference, shifts, counts, note)
        match = len(self.match_entry)
        self.match_left.append(lefts[0])
        self.match_right.append(rights[0])
        self.match_entry.append(entry)
        if counts != (1, 1):
            self.groups[match] = (tuple(lefts), tuple(rights))
        for i in lefts:
            self.left.taken[i] = match
        for j in rights:
            self.right.taken[j] = match

    def _entry(
        self,
        pass_index: int,
        difference: int | None,
        shifts: tuple[int, int] | None,
        counts: tuple[int, int],
        note: str | None,
    ) -> int:
        key = (pass_index, difference, shifts, counts, note)
        entry = self._entry_ids.get(key)
        if entry is not None:
            return entry
        reason = reasons.matched(self, pass_index, difference, shifts, counts, note)
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
        self.entries.append((name, status, difference, reason))
        entry = self._entry_ids[key] = len(self.entries) - 1
        return entry

    def _difference(self, lefts: Sequence[int], rights: Sequence[int]) -> int | None:
        """The match's left sum minus its right sum; None without amounts, with an empty
        amount, or across currencies (a manual match of an earlier definition: never a
        sum of two currencies)."""
        if not self.amounts or len(self.currencies_of(lefts, rights)) > 1:
            return None
        left_amounts = [self.left.amounts[i] for i in lefts]
        right_amounts = [self.right.amounts[i] for i in rights]
        if None in left_amounts or None in right_amounts:
            return None
        return sum(left_amounts) - sum(right_amounts)  # type: ignore[arg-type]

    def currencies_of(self, lefts: Sequence[int], rights: Sequence[int]) -> set[str]:
        """The currencies of the rows (empty ones aside); none where not compared."""
        if not self.currencies:
            return set()
        left, right = self.left.currencies, self.right.currencies
        found = {left[i] for i in lefts} | {right[j] for j in rights}  # type: ignore[index]
        found.discard(None)
        return found  # type: ignore[return-value]

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

    def match(self, match: int) -> Match:
        """Match number `match` (in the order made) as the outcome gives it."""
        name, status, difference, reason = self.entries[self.match_entry[match]]
        group = self.groups.get(match)
        lefts, rights = group or ((self.match_left[match],), (self.match_right[match],))
        left_positions = tuple(self.left.positions[i] for i in lefts)
        right_positions = tuple(self.right.positions[j] for j in rights)
        return Match(
            left_positions[0], status, name, difference, reason, left_positions, right_positions
        )

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
