"""last_run's `amounts`: each side's amounts totalled, matched (in any match),
unmatched and resolved (closed by an analyst with no counterpart), as exact decimal
text at the run's scale; per currency where the sides name one, so dollars and euros
are never added. `absolute_amounts`, in the same shape, totals each row's amount
without its sign: the base of the share reconciled by value (a credit and a debit of
100 are 200 of work, not 0).

Without currencies: `{"left": {"matched": "...", "unmatched": "...", "resolved": "..."},
"right": {...}}`
(each side null without amounts), the shape it always had. With currencies: that shape
per currency code, `{"EUR": {"left": {...}, "right": {...}}, "USD": {...}}`, one entry
for every currency either side has (the other side's totals then `0`), the rows whose
currency is empty under `""`. A full run counts every row (`full`); an incremental run
takes the re-examined rows' earlier share out of the last run's totals and puts their
new share in (`adjusted`): the same figures.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from tally.core.reconciliation import ReconciliationDefinition, SideName, currency_code
from tally.services.reconciliation.matching import SideTable, key_columns
from tally.services.reconciliation.reasons import money

SIDES = (SideName.LEFT, SideName.RIGHT)
MATCHED, UNMATCHED, RESOLVED = "matched", "unmatched", "resolved"
BUCKETS = (MATCHED, UNMATCHED, RESOLVED)
NO_CURRENCY = ""  # the key of the rows whose currency is empty
ABSOLUTE = "absolute_amounts"
# currency (None: empty, or not compared) -> side -> [matched, unmatched, resolved, then
# their absolute values], scaled integers
Buckets = dict[str | None, dict[SideName, list[int]]]
Alone = tuple[Mapping[int, str], Mapping[int, str]]  # a side's unmatched, resolved positions


def full(
    definition: ReconciliationDefinition,
    tables: Sequence[SideTable],
    alone: Sequence[Alone],
    scale: int,
) -> dict[str, Any]:
    """The totals of a full run (`amounts` and `absolute_amounts`): `tables` every row of
    each side (positions 1..n), `alone` each side's unmatched and resolved positions
    (every other row is matched)."""
    if definition.left.amount is None:
        return {"amounts": {"left": None, "right": None}, ABSOLUTE: {"left": None, "right": None}}
    buckets: Buckets = {}
    for which, table, apart in zip(SIDES, tables, alone, strict=True):
        values = table.amounts  # by position (1-based: a full run reads every row)
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
    return _shown(definition, buckets, scale)


def adjusted(
    definition: ReconciliationDefinition,
    last: dict[str, Any],
    sides: Sequence[tuple[SideName, SideTable, int]],
    was: Mapping[SideName, tuple[Collection[int], Collection[int]]],
    now: Mapping[SideName, Alone],
    scale: int,
) -> dict[str, Any]:
    """The last run's totals (`last`: its `amounts` and `absolute_amounts`) with the
    re-examined rows of each side (which, its rows: the earlier ones then the new ones,
    the first new position) moved: an earlier row's share out of where it was (`was`:
    the side's unmatched and resolved positions then), every row's share in where it is
    now."""
    if definition.left.amount is None:
        return {"amounts": last["amounts"], ABSOLUTE: last[ABSOLUTE]}
    buckets = _read(definition, last, scale)
    for which, table, new_from in sides:
        codes = currencies(definition, which, table) or [None] * len(table)
        for position, amount_or_none, code in zip(
            table.positions, table.amounts, codes, strict=True
        ):
            totals = _bucket(buckets, code)[which]
            amount = amount_or_none or 0
            if position < new_from:  # its earlier share out
                _move(totals, _place(position, was[which]), amount, -1)
            _move(totals, _place(position, now[which]), amount, 1)
    return _shown(definition, buckets, scale)


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
    rows of one side moved from one of `BUCKETS` to another (unmatched to resolved,
    resolved to unmatched, unmatched to matched): an analyst's action, shown at once."""
    if definition.left.amount is None:
        return {"amounts": last["amounts"], ABSOLUTE: last[ABSOLUTE]}
    buckets = _read(definition, last, scale)
    codes = currencies(definition, which, table) or [None] * len(table)
    away, into = BUCKETS.index(source), BUCKETS.index(target)
    for amount, code in zip(table.amounts, codes, strict=True):
        totals = _bucket(buckets, code)[which]
        _move(totals, away, amount or 0, -1)
        _move(totals, into, amount or 0, 1)
    return _shown(definition, buckets, scale)


def _place(position: int, alone: tuple[Collection[int], Collection[int]]) -> int:
    """Where a row's amount is totalled: 0 matched, 1 unmatched, 2 resolved."""
    return 1 if position in alone[0] else 2 if position in alone[1] else 0


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
        found = buckets[code] = {which: [0] * 2 * len(BUCKETS) for which in SIDES}
    return found


def _move(totals: list[int], where: int, amount: int, way: int) -> None:
    """A row's amount put into (`way` 1) or taken out of (-1) one of `BUCKETS` (`where`
    its index), and its absolute value with it."""
    totals[where] += way * amount
    totals[where + len(BUCKETS)] += way * abs(amount)


def _shown(definition: ReconciliationDefinition, buckets: Buckets, scale: int) -> dict[str, Any]:
    def sides(per_side: dict[SideName, list[int]], offset: int) -> dict[str, Any]:
        return {
            str(which): {
                name: money(totals[offset + place], scale) for place, name in enumerate(BUCKETS)
            }
            for which, totals in per_side.items()
        }

    absolute = len(BUCKETS)
    if not definition.currencies:
        per_side = buckets.get(None) or _bucket(buckets, None)
        return {"amounts": sides(per_side, 0), ABSOLUTE: sides(per_side, absolute)}
    named = {NO_CURRENCY if code is None else code: b for code, b in buckets.items()}
    return {
        key: {code: sides(named[code], offset) for code in sorted(named)}
        for key, offset in (("amounts", 0), (ABSOLUTE, absolute))
    }


def _read(definition: ReconciliationDefinition, last: dict[str, Any], scale: int) -> Buckets:
    """`_shown`'s figures back as scaled integers."""

    def number(text: str) -> int:
        return int(Decimal(text).scaleb(scale))

    def sides(signed: dict[str, Any], absolute: dict[str, Any]) -> dict[SideName, list[int]]:
        # (a run before resolutions existed kept no `resolved`: none then)
        return {
            which: [
                number(totals[str(which)].get(name, "0"))
                for totals in (signed, absolute)
                for name in BUCKETS
            ]
            for which in SIDES
        }

    amounts, absolute = last["amounts"], last[ABSOLUTE]
    if not definition.currencies:
        return {None: sides(amounts, absolute)}
    return {(code or None): sides(amounts[code], absolute[code]) for code in amounts}
