"""last_run's `amounts`: each side's amounts totalled, matched (in a match of any
status), unmatched and resolved (closed by an analyst with no counterpart), and the
matched split by the match's status, as exact decimal text at the run's scale; per
currency where the sides name one, so dollars and euros are never added.
`absolute_amounts`, in the same shape, totals each row's amount without its sign: the
base of the share reconciled by value (a credit and a debit of 100 are 200 of work, not 0).

Without currencies: `{"left": {"matched": "...", "unmatched": "...", "resolved": "...",
"matched_by_status": {"matched": "...", "matched_with_difference": "...",
"suggested": "...", "manual": "..."}}, "right": {...}}` (each side null without
amounts): `matched` is every match together, as it always was, and `matched_by_status`
the same rows by their match's status (its four figures sum to `matched`). With
currencies: that shape per currency code, `{"EUR": {"left": {...}, "right": {...}},
"USD": {...}}`, one entry for every currency either side has (the other side's totals
then `0`), the rows whose currency is empty under `""`.

A full run counts every row (`full`); an incremental run takes the re-examined rows'
earlier share out of the last run's totals and puts their new share in (`adjusted`);
an analyst's action moves its rows from one status to another (`moved`): the same
figures. A last run from before the split was kept has no `matched_by_status`
(`kept_split` false): an incremental run is then full, and a move keeps it absent.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from tally.core.reconciliation import (
    MatchStatus,
    ReconciliationDefinition,
    SideName,
    currency_code,
)
from tally.services.reconciliation.matching import Matches, Outcome, SideTable, key_columns
from tally.services.reconciliation.reasons import money

SIDES = (SideName.LEFT, SideName.RIGHT)
MATCHED, UNMATCHED, RESOLVED = "matched", "unmatched", "resolved"
BUCKETS = (MATCHED, UNMATCHED, RESOLVED)  # each side's totals, as shown
SPLIT = "matched_by_status"  # `matched` split by the match's status
# The statuses of a row in a match, then of a row in none: where a row's amount is
# totalled (`matched` is the first four together).
MATCH_STATUSES = tuple(
    str(s) for s in MatchStatus if s not in (MatchStatus.UNMATCHED, MatchStatus.RESOLVED)
)
PLACES = (*MATCH_STATUSES, UNMATCHED, RESOLVED)
NO_CURRENCY = ""  # the key of the rows whose currency is empty
ABSOLUTE = "absolute_amounts"
# currency (None: empty, or not compared) -> side -> [each of PLACES, then their absolute
# values], scaled integers
Buckets = dict[str | None, dict[SideName, list[int]]]
# A side's rows (positions) per status but `matched`, for `full` (the rest are matched).
Placed = Mapping[str, Collection[int]]


def statuses(outcome: Outcome) -> tuple[Placed, Placed]:
    """Each side's rows per status but `matched` (`full`'s `placed`): from the run's
    arrays, as a full run has a million matches."""
    matches = outcome.matches
    if not isinstance(matches, Matches):
        raise TypeError("statuses takes an Outcome that reconcile returned")

    def side(which: SideName, unmatched: Collection[int], resolved: Collection[int]) -> Placed:
        found: dict[str, Collection[int]] = {
            status: matches.positions(which, MatchStatus(status)) for status in MATCH_STATUSES[1:]
        }
        return {**found, UNMATCHED: unmatched, RESOLVED: resolved}

    return (
        side(SideName.LEFT, outcome.unmatched_left, outcome.resolved_left),
        side(SideName.RIGHT, outcome.unmatched_right, outcome.resolved_right),
    )


def full(
    definition: ReconciliationDefinition,
    tables: Sequence[SideTable],
    placed: Sequence[Placed],
    scale: int,
) -> dict[str, Any]:
    """The totals of a full run (`amounts` and `absolute_amounts`): `tables` every row of
    each side (positions 1..n), `placed` each side's rows per status but `matched`
    (`statuses`: every other row is in a match of status `matched`)."""
    if definition.left.amount is None:
        return {"amounts": {"left": None, "right": None}, ABSOLUTE: {"left": None, "right": None}}
    buckets: Buckets = {}
    for which, table, given in zip(SIDES, tables, placed, strict=True):
        values = table.amounts  # by position (1-based: a full run reads every row)
        apart = [given.get(status, ()) for status in PLACES[1:]]
        codes = currencies(definition, which, table)
        if codes is None:  # summed at once: a full run's sides may have millions of rows
            signed = [sum(values[p - 1] or 0 for p in rows) for rows in apart]
            absolute = [sum(abs(values[p - 1] or 0) for p in rows) for rows in apart]
            _bucket(buckets, None)[which] = [
                sum(filter(None, values)) - sum(signed),
                *signed,
                sum(map(abs, filter(None, values))) - sum(absolute),
                *absolute,
            ]
            continue
        for code in set(codes):
            _bucket(buckets, code)
        for code, amount in zip(codes, values, strict=True):
            if amount:
                _move(buckets[code][which], 0, amount, 1)
        for place, rows in enumerate(apart, start=1):
            for p in rows:
                amount = values[p - 1] or 0
                _move(buckets[codes[p - 1]][which], 0, amount, -1)
                _move(buckets[codes[p - 1]][which], place, amount, 1)
    return _shown(definition, buckets, scale, split=True)


def adjusted(
    definition: ReconciliationDefinition,
    last: dict[str, Any],
    sides: Sequence[tuple[SideName, SideTable, int]],
    was: Mapping[SideName, Mapping[int, str]],
    now: Mapping[SideName, Mapping[int, str]],
    scale: int,
) -> dict[str, Any]:
    """The last run's totals (`last`: its `amounts` and `absolute_amounts`, split by
    status: `kept_split`) with the re-examined rows of each side (which, its rows: the
    earlier ones then the new ones, the first new position) moved: an earlier row's
    share out of the status it had (`was`: position -> status), every row's share into
    the status it has now (`now`)."""
    if definition.left.amount is None:
        return {"amounts": last["amounts"], ABSOLUTE: last[ABSOLUTE]}
    buckets, split = _read(definition, last, scale)
    for which, table, new_from in sides:
        codes = currencies(definition, which, table) or [None] * len(table)
        for position, amount_or_none, code in zip(
            table.positions, table.amounts, codes, strict=True
        ):
            totals = _bucket(buckets, code)[which]
            amount = amount_or_none or 0
            if position < new_from:  # its earlier share out
                _move(totals, PLACES.index(was[which][position]), amount, -1)
            _move(totals, PLACES.index(now[which][position]), amount, 1)
    return _shown(definition, buckets, scale, split=split)


def moved(
    definition: ReconciliationDefinition,
    last: dict[str, Any],
    which: SideName,
    table: SideTable,
    *,
    source: str,
    target: str,
    scale: int,
) -> dict[str, Any]:
    """The last run's totals (`last`: its `amounts` and `absolute_amounts`) with these
    rows of one side moved from one status to another (unmatched to resolved, resolved
    to unmatched, unmatched to manual): an analyst's action, shown at once. Totals kept
    without the split stay so (`kept_split`)."""
    if definition.left.amount is None:
        return {"amounts": last["amounts"], ABSOLUTE: last[ABSOLUTE]}
    buckets, split = _read(definition, last, scale)
    codes = currencies(definition, which, table) or [None] * len(table)
    away, into = PLACES.index(source), PLACES.index(target)
    for amount, code in zip(table.amounts, codes, strict=True):
        totals = _bucket(buckets, code)[which]
        _move(totals, away, amount or 0, -1)
        _move(totals, into, amount or 0, 1)
    return _shown(definition, buckets, scale, split=split)


def kept_split(definition: ReconciliationDefinition, last: Mapping[str, Any]) -> bool:
    """Whether last_run's `amounts` have the matched split by status (a run from before
    it was kept has none; nor need totals of no amounts)."""
    amounts = last.get("amounts")
    if definition.left.amount is None or amounts is None:
        return True
    per_currency = amounts.values() if definition.currencies else [amounts]
    return all(t is None or SPLIT in t for per in per_currency for t in per.values())


def currencies(
    definition: ReconciliationDefinition, which: SideName, table: SideTable
) -> list[str | None] | None:
    """Each row's currency code (`currency_code`), or None where not compared."""
    if not definition.currencies:
        return None
    if not len(table):
        return []
    column = key_columns(definition, which).index(definition.side(which).currency or "")
    return list(map(currency_code, table.keys[column]))


def _bucket(buckets: Buckets, code: str | None) -> dict[SideName, list[int]]:
    found = buckets.get(code)
    if found is None:
        found = buckets[code] = {which: [0] * 2 * len(PLACES) for which in SIDES}
    return found


def _move(totals: list[int], where: int, amount: int, way: int) -> None:
    """A row's amount put into (`way` 1) or taken out of (-1) one of `PLACES` (`where`
    its index), and its absolute value with it."""
    totals[where] += way * amount
    totals[where + len(PLACES)] += way * abs(amount)


def _shown(
    definition: ReconciliationDefinition, buckets: Buckets, scale: int, *, split: bool
) -> dict[str, Any]:
    def side(totals: Sequence[int]) -> dict[str, Any]:
        placed = dict(zip(PLACES, totals, strict=True))
        shown: dict[str, Any] = {
            MATCHED: money(sum(placed[s] for s in MATCH_STATUSES), scale),
            UNMATCHED: money(placed[UNMATCHED], scale),
            RESOLVED: money(placed[RESOLVED], scale),
        }
        if split:
            shown[SPLIT] = {s: money(placed[s], scale) for s in MATCH_STATUSES}
        return shown

    def sides(per_side: dict[SideName, list[int]], offset: int) -> dict[str, Any]:
        return {
            str(which): side(totals[offset : offset + len(PLACES)])
            for which, totals in per_side.items()
        }

    absolute = len(PLACES)
    if not definition.currencies:
        per_side = buckets.get(None) or _bucket(buckets, None)
        return {"amounts": sides(per_side, 0), ABSOLUTE: sides(per_side, absolute)}
    named = {NO_CURRENCY if code is None else code: b for code, b in buckets.items()}
    return {
        key: {code: sides(named[code], offset) for code in sorted(named)}
        for key, offset in (("amounts", 0), (ABSOLUTE, absolute))
    }


def _read(
    definition: ReconciliationDefinition, last: dict[str, Any], scale: int
) -> tuple[Buckets, bool]:
    """`_shown`'s figures back as scaled integers, and whether they kept the split
    (without it, `matched` is counted as status `matched`: shown together again)."""

    def number(text: str) -> int:
        return int(Decimal(text).scaleb(scale))

    def side(totals: Mapping[str, Any]) -> list[int]:
        # (a run before resolutions existed kept no `resolved`: none then)
        split = totals.get(SPLIT) or {MATCHED: totals[MATCHED]}
        return [
            *(number(split.get(s, "0")) for s in MATCH_STATUSES),
            number(totals[UNMATCHED]),
            number(totals.get(RESOLVED, "0")),
        ]

    def sides(signed: dict[str, Any], absolute: dict[str, Any]) -> dict[SideName, list[int]]:
        return {which: [*side(signed[str(which)]), *side(absolute[str(which)])] for which in SIDES}

    amounts, absolute = last["amounts"], last[ABSOLUTE]
    split = kept_split(definition, last)
    if not definition.currencies:
        return {None: sides(amounts, absolute)}, split
    return {(code or None): sides(amounts[code], absolute[code]) for code in amounts}, split
