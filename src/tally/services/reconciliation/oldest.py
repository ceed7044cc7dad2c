"""last_run's `oldest_unmatched`: per side, the earliest date among its unmatched rows
and how many unmatched rows have it, so the overview can say how old the oldest open
item is without reading the output (`{"left": {"date": "2024-01-03", "rows": 2},
"right": null}`; null altogether when the sides name no date column).

A run keeps, in its basis for the next run, each side's unmatched rows per date for the
KEPT_DAYS earliest dates (`through`: the last date it knows every row of; None: it knows
every date). A full run counts them among every unmatched row (`full`); an incremental
run moves the re-examined rows in and out (`adjusted`), as totals.py does. Only when
every row of the dates kept was matched does the next date lie among rows the run did
not read: then it answers why the run must be full instead. Resolved rows are not
unmatched: they count nowhere here.

An analyst's action moves rows out of unmatched (resolved, matched by hand) or back in
(a resolution undone) at once, in its transaction (`moved`, from patches.py). When that
empties every date kept of a side whose later dates were not kept, its oldest is not
known: the side shows `{"date": null, "rows": null}` until the next run, which is full
(the action changed the output: incremental.why_full), and counts every row again.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.services.reconciliation.rows import SideTable

SIDES = (SideName.LEFT, SideName.RIGHT)
KEPT_DAYS = 64
OLDEST = "oldest_unmatched"  # its key in last_run and in the run's basis
Kept = dict[str, Any]  # {"days": [[date.toordinal(), rows], ...] ascending, "through": int | None}
Figures = tuple[dict[str, Any] | None, dict[str, Kept] | None]  # (shown, kept)


def full(
    definition: ReconciliationDefinition,
    tables: Sequence[SideTable],
    unmatched: Sequence[Mapping[int, str]],
) -> Figures:
    """`tables` every row of each side (positions 1..n), `unmatched` each side's
    unmatched positions."""
    if definition.left.date is None:
        return None, None
    kept = {
        str(which): _kept(
            Counter(d for d in (table.days[p - 1] for p in apart) if d is not None), None
        )
        for which, table, apart in zip(SIDES, tables, unmatched, strict=True)
    }
    return _shown(kept), kept


def adjusted(
    definition: ReconciliationDefinition,
    last: Mapping[str, Kept] | None,
    sides: Sequence[tuple[SideName, SideTable, int]],
    was_unmatched: Mapping[SideName, set[int]],
    now_unmatched: Mapping[SideName, Mapping[int, str]],
) -> Figures | str:
    """The last run's (`last`) with the re-examined rows of each side (which, its rows,
    the first new position) moved; or why the run must be full."""
    if definition.left.date is None or last is None:
        return None, None
    kept = dict(last)
    for which, table, new_from in sides:
        before = last[str(which)]
        through = before["through"]
        days = Counter({day: rows for day, rows in before["days"]})
        for position, day in zip(table.positions, table.days, strict=True):
            if day is None:
                continue
            if position < new_from and position in was_unmatched[which] and day in days:
                days[day] -= 1
            if position in now_unmatched[which] and (through is None or day <= through):
                days[day] += 1
        days = +days  # the dates left with no row dropped
        if not days and through is not None:
            return f"every {which} row of the oldest unmatched dates was matched"
        kept[str(which)] = _kept(days, through)
    return _shown(kept), kept


def moved(
    definition: ReconciliationDefinition,
    last: Mapping[str, Kept] | None,
    which: SideName,
    days: Sequence[int | None],
    way: int,
) -> Figures:
    """The last kept dates (`last`, the basis's) with rows of one side, their `days`,
    taken out of unmatched (`way` -1) or put back (1). A date after `through` is not
    kept: a row of it changes nothing kept (its date was never the oldest known)."""
    if definition.left.date is None or last is None:
        return None, None
    through = last[str(which)]["through"]
    counts = Counter({day: rows for day, rows in last[str(which)]["days"]})
    for day in days:
        if day is not None and (through is None or day <= through):
            counts[day] += way
    kept = {**last, str(which): _kept(+counts, through)}
    return _shown(kept), kept


def _kept(days: Counter[int], through: int | None) -> Kept:
    earliest = sorted(days.items())
    if len(earliest) > KEPT_DAYS:
        earliest = earliest[:KEPT_DAYS]
        through = earliest[-1][0]
    return {"days": [list(pair) for pair in earliest], "through": through}


def _shown(kept: Mapping[str, Kept]) -> dict[str, Any]:
    def first(side: Kept) -> dict[str, Any] | None:
        for day, rows in side["days"]:
            return {"date": dt.date.fromordinal(day).isoformat(), "rows": rows}
        # none kept: no unmatched row, or (after an action) its date not known
        return None if side["through"] is None else {"date": None, "rows": None}

    return {str(which): first(kept[str(which)]) for which in SIDES}
