"""last_run's `amounts`: each side's amounts totalled, matched (in any match) and
unmatched, as exact decimal text at the run's scale; per currency where the sides name
one, so dollars and euros are never added. `absolute_amounts`, in the same shape, totals
each row's amount without its sign: the base of the share reconciled by value (a credit
and a debit of 100 are 200 of work, not 0).

Without currencies: `{"left": {"matched": "...", "unmatched": "..."}, "right": {...}}`
(each side null without amounts), the shape it always had. With currencies: that shape
per currency code, `{"EUR": {"left": {...}, "right": {...}}, "USD": {...}}`, one entry
for every currency either side has (the other side's totals then `0`), the rows whose
currency is empty under `""`. A full run counts every row (`full`); an incremental run
takes the re-examined rows' earlier share out of the last run's totals and puts their
new share in (`adjusted`): the same figures. Both return `{"amounts", "absolute_amounts"}`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from tally.core.reconciliation import ReconciliationDefinition, SideName, currency_code
from tally.services.reconciliation.matching import SideTable, key_columns
from tally.services.reconciliation.reasons import money

SIDES = (SideName.LEFT, SideName.RIGHT)
MATCHED, UNMATCHED = "matched", "unmatched"
NO_CURRENCY = ""  # the key of the rows whose currency is empty
ABSOLUTE = "absolute_amounts"
# currency (None: empty, or not compared) -> side -> [matched, unmatched, their absolute
# values], scaled integers
Buckets = dict[str | None, dict[SideName, list[int]]]


def full(
    definition: ReconciliationDefinition,
    tables: Sequence[SideTable],
    unmatched: Sequence[Mapping[int, str]],
    scale: int,
) -> dict[str, Any]:
    """The totals of a full run: `tables` every row of each side (positions 1..n),
    `unmatched` each side's unmatched positions."""
    if definition.left.amount is None:
        return {"amounts": {"left": None, "right": None}, ABSOLUTE: {"left": None, "right": None}}
    buckets: Buckets = {}
    for which, table, apart in zip(SIDES, tables, unmatched, strict=True):
        values = table.amounts  # by position (1-based: a full run reads every row)
        codes = currencies(definition, which, table)
        if codes is None:
            total = sum(filter(None, values))
            absolute = sum(map(abs, filter(None, values)))
            away = sum(values[p - 1] or 0 for p in apart)  # every other is matched
            away_absolute = sum(abs(values[p - 1] or 0) for p in apart)
            _bucket(buckets, None)[which] = [
                total - away,
                away,
                absolute - away_absolute,
                away_absolute,
            ]
            continue
        for code in set(codes):
            _bucket(buckets, code)
        for code, amount in zip(codes, values, strict=True):
            if amount:
                _move(buckets[code][which], 0, amount, 1)
        for p in apart:
            amount = values[p - 1] or 0
            _move(buckets[codes[p - 1]][which], 0, amount, -1)
            _move(buckets[codes[p - 1]][which], 1, amount, 1)
    return _shown(definition, buckets, scale)


def adjusted(
    definition: ReconciliationDefinition,
    last: dict[str, Any],
    sides: Sequence[tuple[SideName, SideTable, int]],
    was_unmatched: Mapping[SideName, set[int]],
    now_unmatched: Mapping[SideName, Mapping[int, str]],
    scale: int,
) -> dict[str, Any]:
    """The last run's totals (`last`: its `amounts` and `absolute_amounts`) with the
    re-examined rows of each side (which, its rows: the earlier ones then the new ones,
    the first new position) moved: an
    earlier row's share out of where it was, every row's share in where it is now."""
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
                _move(totals, 1 if position in was_unmatched[which] else 0, amount, -1)
            _move(totals, 1 if position in now_unmatched[which] else 0, amount, 1)
    return _shown(definition, buckets, scale)


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
        found = buckets[code] = {which: [0, 0, 0, 0] for which in SIDES}
    return found


def _move(totals: list[int], where: int, amount: int, way: int) -> None:
    """A row's amount put into (`way` 1) or taken out of (-1) matched (`where` 0) or
    unmatched (1), and its absolute value with it."""
    totals[where] += way * amount
    totals[where + 2] += way * abs(amount)


def _shown(definition: ReconciliationDefinition, buckets: Buckets, scale: int) -> dict[str, Any]:
    def sides(per_side: dict[SideName, list[int]], offset: int) -> dict[str, Any]:
        return {
            str(which): {
                MATCHED: money(totals[offset], scale),
                UNMATCHED: money(totals[offset + 1], scale),
            }
            for which, totals in per_side.items()
        }

    if not definition.currencies:
        per_side = buckets.get(None) or _bucket(buckets, None)
        return {"amounts": sides(per_side, 0), ABSOLUTE: sides(per_side, 2)}
    named = {NO_CURRENCY if code is None else code: b for code, b in buckets.items()}
    return {
        key: {code: sides(named[code], offset) for code in sorted(named)}
        for key, offset in (("amounts", 0), (ABSOLUTE, 2))
    }


def _read(definition: ReconciliationDefinition, last: dict[str, Any], scale: int) -> Buckets:
    """`_shown`'s figures back as scaled integers."""

    def number(text: str) -> int:
        return int(Decimal(text).scaleb(scale))

    def sides(signed: dict[str, Any], absolute: dict[str, Any]) -> dict[SideName, list[int]]:
        return {
            which: [
                number(totals[str(which)][kind])
                for totals in (signed, absolute)
                for kind in (MATCHED, UNMATCHED)
            ]
            for which in SIDES
        }

    amounts, absolute = last["amounts"], last[ABSOLUTE]
    if not definition.currencies:
        return {None: sides(amounts, absolute)}
    return {(code or None): sides(amounts[code], absolute[code]) for code in amounts}
