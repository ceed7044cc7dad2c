"""A plain model of the matching rules (issue #11, section 1), for the engine's property
and truth tests.

Written from the rules only, never from the engine's code: rows are dicts, every pass
looks at every pair, a one-to-one pass takes the single best pair and starts again.
Slow (cubic) and obviously right. It decides matches, statuses and differences; reasons
are the engine's own and have unit tests. Currencies (when both sides name one): rows
match only within one currency, compared trimmed and upper-cased, and a row whose
currency is empty matches nothing in any pass; a manual match holding two currencies has
no difference. last_run's amount totals are counted plainly from the outcome (`totals`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from tally.core.reconciliation import (
    MatchPass,
    MatchStatus,
    PassType,
    ReconciliationDefinition,
)


@dataclass
class ModelRow:
    position: int
    values: dict[str, Any]  # column -> typed value (None: empty); keys are text
    content: tuple[Any, ...]  # the row's values in column order, for the tie-break


@dataclass(frozen=True)
class ModelMatch:
    match_id: int
    status: MatchStatus
    pass_name: str
    difference: int | None
    left: tuple[int, ...]
    right: tuple[int, ...]


# matches; unmatched left and right positions; resolved left and right positions
ModelOutcome = tuple[list[ModelMatch], set[int], set[int], set[int], set[int]]


def normalise(text: str | None, steps: Sequence[str]) -> str | None:
    if text is None:
        return None
    for step in steps:
        if step == "trim":
            text = text.strip()
        elif step == "casefold":
            text = text.casefold()
        elif step == "collapse_spaces":
            out, in_space = [], False
            for char in text:
                if char.isspace():
                    if not in_space:
                        out.append(" ")
                    in_space = True
                else:
                    out.append(char)
                    in_space = False
            text = "".join(out)
        elif step == "strip_leading_zeros":
            stripped = text.lstrip("0")
            text = "0" if text and not stripped else stripped
        elif step == "alnum_only":
            text = "".join(c for c in text if c.isalnum())
        elif step == "digits_only":
            text = "".join(c for c in text if c in "0123456789")
        else:
            raise AssertionError(step)
    return text if text != "" else None


def currency(row: ModelRow, definition: ReconciliationDefinition, left: bool) -> str | None:
    """The row's currency as compared: trimmed, upper-cased, None when empty."""
    value = row.values[(definition.left if left else definition.right).currency]  # type: ignore[index]
    return None if value is None or not value.strip() else value.strip().upper()


def _key(row: ModelRow, match_pass: MatchPass, left: bool) -> tuple[str, ...] | None:
    parts = []
    for pair in match_pass.keys:
        value = normalise(row.values[pair.left if left else pair.right], pair.normalize)
        if value is None:
            return None
        parts.append(value)
    return tuple(parts)


def _content_key(row: ModelRow) -> tuple[Any, ...]:
    return tuple((0,) if v is None else (1, v) for v in row.content)


ABSOLUTE = "absolute_amounts"
MATCH_STATUSES = ("matched", "matched_with_difference", "suggested", "manual")


class Model:
    def __init__(
        self,
        definition: ReconciliationDefinition,
        left: list[ModelRow],
        right: list[ModelRow],
        scale: int,
        manual_matches: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
        rejections: Sequence[tuple[Sequence[int], Sequence[int]]] = (),
        resolved: tuple[Sequence[int], Sequence[int]] = ((), ()),
    ) -> None:
        self.d = definition
        self.left = {r.position: r for r in left}
        self.right = {r.position: r for r in right}
        self.scale = scale
        self.amounts = definition.left.amount is not None and definition.right.amount is not None
        self.dates = definition.left.date is not None and definition.right.date is not None
        self.currencies = definition.left.currency is not None and (
            definition.right.currency is not None
        )
        self.rejected = {(a, b) for lefts, rights in rejections for a in lefts for b in rights}
        self.taken_left: set[int] = set()
        self.taken_right: set[int] = set()
        self.matches: list[ModelMatch] = []
        for lefts, rights in manual_matches:
            lefts = [p for p in lefts if p in self.left and p not in self.taken_left]
            rights = [p for p in rights if p in self.right and p not in self.taken_right]
            if lefts and rights:
                self._take(None, lefts, rights)
        # resolutions close the rows no manual match took; no pass takes them
        self.resolved_left = set(resolved[0]) & (set(self.left) - self.taken_left)
        self.resolved_right = set(resolved[1]) & (set(self.right) - self.taken_right)
        self.taken_left |= self.resolved_left
        self.taken_right |= self.resolved_right

    def amount(self, row: ModelRow, left: bool) -> Any:
        return row.values[self.d.left.amount if left else self.d.right.amount]  # type: ignore[index]

    def day(self, row: ModelRow, left: bool) -> Any:
        return row.values[self.d.left.date if left else self.d.right.date]  # type: ignore[index]

    def tolerance(self, match_pass: MatchPass) -> int:
        return int(match_pass.amount_tolerance * Decimal(10) ** self.scale)

    def _take(self, match_pass: MatchPass | None, lefts: list[int], rights: list[int]) -> None:
        lefts, rights = sorted(lefts), sorted(rights)
        difference = None
        if self.amounts:
            la = [self.amount(self.left[p], True) for p in lefts]
            ra = [self.amount(self.right[p], False) for p in rights]
            codes: set[str | None] = set()
            if self.currencies:
                codes = {currency(self.left[p], self.d, True) for p in lefts} | {
                    currency(self.right[p], self.d, False) for p in rights
                }
                codes.discard(None)
            if None not in la and None not in ra and len(codes) < 2:
                difference = sum(la) - sum(ra)
        if match_pass is None:
            status, name = MatchStatus.MANUAL, "manual"
        else:
            name = match_pass.name
            if not match_pass.auto_confirm:
                status = MatchStatus.SUGGESTED
            elif difference:
                status = MatchStatus.MATCHED_WITH_DIFFERENCE
            else:
                status = MatchStatus.MATCHED
        self.matches.append(
            ModelMatch(lefts[0], status, name, difference, tuple(lefts), tuple(rights))
        )
        self.taken_left.update(lefts)
        self.taken_right.update(rights)

    def _usable(self, row: ModelRow, left: bool) -> bool:
        """A row with an empty compared amount or date matches nothing in a pass."""
        if self.amounts and self.amount(row, left) is None:
            return False
        if self.currencies and currency(row, self.d, left) is None:
            return False
        return not (self.dates and self.day(row, left) is None)

    def _fits_date(self, match_pass: MatchPass, a: ModelRow, b: ModelRow) -> bool:
        if not self.dates:
            return True
        before, after = match_pass.date_window
        return before <= self.day(b, False) - self.day(a, True) <= after

    def run(self) -> Model:
        for match_pass in self.d.passes:
            if match_pass.type is PassType.ONE_TO_ONE:
                self._one_to_one(match_pass)
            else:
                self._grouped(match_pass)
        return self

    def _one_to_one(self, match_pass: MatchPass) -> None:
        """Take the best candidate pair, then look again, until none is left."""
        while True:
            ranked = [
                (rank, a.position, b.position)
                for a in self.left.values()
                for b in self.right.values()
                if (rank := self._rank(match_pass, a, b)) is not None
            ]
            if not ranked:
                return
            _, left, right = min(ranked)
            self._take(match_pass, [left], [right])

    def _rank(self, match_pass: MatchPass, a: ModelRow, b: ModelRow) -> tuple[Any, ...] | None:
        """The pair's place in the greedy order, or None when it is no candidate."""
        if a.position in self.taken_left or b.position in self.taken_right:
            return None
        if not (self._usable(a, True) and self._usable(b, False)):
            return None
        key = _key(a, match_pass, True)
        if key is None or key != _key(b, match_pass, False):
            return None
        if self.currencies and currency(a, self.d, True) != currency(b, self.d, False):
            return None
        gap = abs(self.amount(a, True) - self.amount(b, False)) if self.amounts else 0
        if gap > self.tolerance(match_pass) or not self._fits_date(match_pass, a, b):
            return None
        if (a.position, b.position) in self.rejected:
            return None
        shift = abs(self.day(b, False) - self.day(a, True)) if self.dates else 0
        return (gap, shift, _content_key(a), _content_key(b), a.position, b.position)

    def _grouped(self, match_pass: MatchPass) -> None:
        """Each lone free row of the one side with all the fitting free rows of the other
        side that share its key, when their sum fits (groups never overlap: decided first,
        taken after)."""
        one_is_left = match_pass.type is PassType.ONE_TO_MANY
        ones = self.left if one_is_left else self.right
        taken_one = self.taken_left if one_is_left else self.taken_right
        decided = []
        for o in ones.values():
            key = _key(o, match_pass, one_is_left)
            if o.position in taken_one or key is None or not self._usable(o, one_is_left):
                continue
            twins = [
                p
                for p in ones.values()
                if p.position not in taken_one
                and _key(p, match_pass, one_is_left) == key
                and self._same_currency(p, one_is_left, o, one_is_left)
            ]
            group = self._group(match_pass, o, key, one_is_left)
            if len(twins) == 1 and group:
                decided.append((o, group))
        for o, group in decided:
            if one_is_left:
                self._take(match_pass, [o.position], [m.position for m in group])
            else:
                self._take(match_pass, [m.position for m in group], [o.position])

    def _group(
        self, match_pass: MatchPass, o: ModelRow, key: tuple[str, ...], one_is_left: bool
    ) -> list[ModelRow]:
        """The group row `o` would take, or [] when it does not fit."""
        many = self.right if one_is_left else self.left
        taken_many = self.taken_right if one_is_left else self.taken_left
        group = [
            m
            for m in many.values()
            if m.position not in taken_many
            and self._usable(m, not one_is_left)
            and _key(m, match_pass, not one_is_left) == key
            and self._same_currency(m, not one_is_left, o, one_is_left)
            and self._fits_date(match_pass, *((o, m) if one_is_left else (m, o)))
        ]
        pairs = [
            (o.position, m.position) if one_is_left else (m.position, o.position) for m in group
        ]
        if any(p in self.rejected for p in pairs):
            return []
        if self.amounts:
            total = sum(self.amount(m, not one_is_left) for m in group)
            if abs(self.amount(o, one_is_left) - total) > self.tolerance(match_pass):
                return []
        return group

    def _same_currency(self, a: ModelRow, a_left: bool, b: ModelRow, b_left: bool) -> bool:
        if not self.currencies:
            return True
        return currency(a, self.d, a_left) == currency(b, self.d, b_left)

    def outcome(self) -> ModelOutcome:
        """The matches, then each side's unmatched rows, then each side's resolved rows."""
        return (
            sorted(self.matches, key=lambda m: m.match_id),
            set(self.left) - self.taken_left,
            set(self.right) - self.taken_right,
            self.resolved_left,
            self.resolved_right,
        )

    def totals(self) -> dict[str, Any]:
        """last_run's `amounts` and `absolute_amounts` counted plainly, after `run`: each
        row's amount (signed; without its sign) added to its side's total of its status
        (a matched row's: its match's), per currency where both sides name one; `matched`
        every match status together, `matched_by_status` each."""
        if self.d.left.amount is None:
            return {
                "amounts": {"left": None, "right": None},
                ABSOLUTE: {"left": None, "right": None},
            }
        status: dict[tuple[bool, int], str] = {}
        for m in self.matches:
            status.update({(True, p): str(m.status) for p in m.left})
            status.update({(False, p): str(m.status) for p in m.right})
        _, unmatched_left, unmatched_right, resolved_left, resolved_right = self.outcome()
        for left, rows, name in (
            (True, unmatched_left, "unmatched"),
            (False, unmatched_right, "unmatched"),
            (True, resolved_left, "resolved"),
            (False, resolved_right, "resolved"),
        ):
            status.update({(left, p): name for p in rows})
        # (currency or None, side, status) -> [signed, absolute], in units of the scale
        found: dict[tuple[str | None, str, str], list[int]] = {}
        codes: set[str | None] = set()
        for (left, position), name in status.items():
            row = (self.left if left else self.right)[position]
            code = (currency(row, self.d, left) or "") if self.currencies else None
            codes.add(code)
            value = self.amount(row, left) or 0
            sums = found.setdefault((code, "left" if left else "right", name), [0, 0])
            sums[0] += value
            sums[1] += abs(value)
        if not self.currencies:
            codes = {None}

        def text(n: int) -> str:
            return str((Decimal(n) / 10**self.scale).quantize(Decimal(1).scaleb(-self.scale)))

        def side(code: str | None, which: str, at: int) -> dict[str, Any]:
            def total(*names: str) -> str:
                return text(sum(found.get((code, which, n), [0, 0])[at] for n in names))

            return {
                "matched": total(*MATCH_STATUSES),
                "unmatched": total("unmatched"),
                "resolved": total("resolved"),
                "matched_by_status": {n: total(n) for n in MATCH_STATUSES},
            }

        shown = {
            key: {code: {w: side(code, w, at) for w in ("left", "right")} for code in codes}
            for key, at in (("amounts", 0), (ABSOLUTE, 1))
        }
        if not self.currencies:
            return {key: per[None] for key, per in shown.items()}
        return shown
