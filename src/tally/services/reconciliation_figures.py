"""A reconciliation's figures as the overview, its page and GET /api/v2/resources show
them, read from its last run (`last_run`, as GET /api/v2/reconciliations/{id} gives it)
and its inputs' sizes now: never from the output's rows.

Shares are of each side's rows at the last run, rounded down to 0.1 (so 100.0 means every
row): by count, the rows closed (in a match of any status, suggestions too, or resolved
by an analyst: every row not unmatched) over the side's rows; by value, the absolute
amounts of those rows over the absolute amounts of all the side's rows (a credit and a
debit of 100 each are 200 to reconcile; signed totals could sum to 0), per currency
where the sides name currencies. Resolved rows count as closed, as BlackLine counts
explained items (docs/reconciliation.md); their rows and amounts are shown beside the
shares. Both are blank once an input has rows the run did not see.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, Decimal
from typing import Any

from tally.services.reconciliation.totals import MATCH_STATUSES as ENGINE_MATCH_STATUSES
from tally.services.reconciliation.totals import SPLIT

SIDES = ("left", "right")
MATCH_STATUSES = ("matched", "matched_with_difference", "manual")  # a suggestion waits
PERCENT = Decimal("0.1")
# the statuses of a match, the engine's order: last_run's `matched` split by them
MATCHED_PER_STATUS = ENGINE_MATCH_STATUSES


@dataclass(frozen=True)
class SideFigures:
    """One side of a reconciliation's last run: its unmatched rows and their amount, its
    rows resolved by an analyst, the shares of it reconciled, and its oldest unmatched
    row's date and age in days (None: no unmatched row has a date, the sides name no date
    column, or not known: `oldest_unmatched_known` False)."""

    side: str
    unmatched_rows: int
    resolved_rows: int
    unmatched_amount: str | None  # exact decimal text; per currency `EUR 1.00, GBP 2.00`
    reconciled_percent: str | None  # `97.5`; None when the input changed since the run
    reconciled_by_value_percent: str | None  # `97.5`; per currency `EUR 97.5, GBP 100.0`
    oldest_unmatched_date: dt.date | None
    oldest_unmatched_days: int | None
    # False while an analyst's action closed every row of the earliest dates the run kept
    # (oldest.py): not known until the next run.
    oldest_unmatched_known: bool = True


@dataclass(frozen=True)
class ReconciliationFigures:
    matches: int  # matched, with a difference, or manual (a one-to-many match is one)
    suggested: int  # suggestions waiting for an analyst
    sides: tuple[SideFigures, SideFigures]
    # False for a run made before tally kept absolute amounts and unmatched dates: its
    # share by value and oldest item are not known until the next run.
    has_value_and_age: bool


@dataclass(frozen=True)
class AmountLine:
    """One side's totals of one currency (None: the sides name none) at the last run,
    exact decimal text, and its share reconciled by value (None when the side's amounts
    total 0, or for a run made before tally kept absolute amounts)."""

    side: str
    currency: str | None  # `""`: the rows whose currency is empty
    matched: str
    unmatched: str
    resolved: str | None  # None for a run made before resolutions existed
    reconciled_by_value_percent: str | None
    # `matched` per match status (`MATCHED_PER_STATUS`' order), as last_run keeps them;
    # None for a run made before they were kept: not known until the next run
    matched_by_status: tuple[tuple[str, str], ...] | None = None


def amount_lines(last_run: Mapping[str, Any]) -> list[AmountLine]:
    """The last run's `amounts` a line per side and currency (none without amounts)."""
    amounts = last_run.get("amounts") or {}
    absolute = last_run.get("absolute_amounts") or {}
    per_currency: Mapping[str | None, Any] = amounts
    if set(amounts) <= set(SIDES):
        per_currency = {None: amounts}
        absolute = {None: absolute}
    lines = []
    for code, per_side in per_currency.items():
        for side in SIDES:
            totals = per_side.get(side)
            if totals is not None:
                value = _value_share((absolute.get(code) or {}).get(side))
                lines.append(
                    AmountLine(
                        side,
                        code,
                        totals["matched"],
                        totals["unmatched"],
                        totals.get("resolved"),
                        value,
                        _split(totals.get(SPLIT)),
                    )
                )
    return lines


def _split(found: Mapping[str, str] | None) -> tuple[tuple[str, str], ...] | None:
    """A side's matched amounts per status, in `MATCHED_PER_STATUS`' order."""
    return None if found is None else tuple((s, found[s]) for s in MATCHED_PER_STATUS)


def reconciliation_figures(
    last_run: Mapping[str, Any], sizes: Mapping[int, tuple[int, int]], today: dt.date
) -> ReconciliationFigures:
    """The figures of a last run; `sizes`: its inputs' row counts and data versions now."""
    counts = last_run["counts"]
    amounts = last_run.get("amounts") or {}
    absolute = last_run.get("absolute_amounts") or {}
    oldest = last_run.get("oldest_unmatched") or {}
    sides = []
    for side in SIDES:
        unmatched = int(counts.get(f"unmatched_{side}", 0))
        source = (last_run.get("inputs") or {}).get(side) or {}
        rows, version = sizes.get(source.get("resource_id", -1), (0, -1))
        current = version == source.get("data_version")
        percent = share(rows - unmatched, rows) if current and rows else None
        by_value = _by_value(absolute, side) if current else None
        found = oldest.get(side)
        first = (found or {}).get("date")
        date = dt.date.fromisoformat(first) if first else None
        age = (today - date).days if date else None
        sides.append(
            SideFigures(
                side,
                unmatched,
                int(counts.get(f"resolved_{side}", 0)),
                _unmatched_amount(amounts, side),
                percent,
                by_value,
                date,
                age,
                oldest_unmatched_known=found is None or first is not None,
            )
        )
    return ReconciliationFigures(
        matches=sum(int(counts.get(k, 0)) for k in MATCH_STATUSES),
        suggested=int(counts.get("suggested", 0)),
        sides=(sides[0], sides[1]),
        has_value_and_age="absolute_amounts" in last_run and "oldest_unmatched" in last_run,
    )


def share(part: Decimal | int, whole: Decimal | int) -> str:
    """part / whole as a percentage, rounded down to 0.1: `99.9` for 999 of 1000 and for
    9999 of 10000 (never `100.0` while something is left)."""
    return str((Decimal(part) * 100 / Decimal(whole)).quantize(PERCENT, rounding=ROUND_DOWN))


def _by_value(absolute: Mapping[str, Any], side: str) -> str | None:
    """A side's share reconciled by value; per currency where the sides name currencies
    (a currency the side has no amount in is left out); None without amounts."""
    if set(absolute) <= set(SIDES):
        return _value_share(absolute.get(side))
    shares = ((code, _value_share(per[side])) for code, per in absolute.items())
    return ", ".join(f"{code or '(none)'} {found}" for code, found in shares if found) or None


def _value_share(totals: Mapping[str, str] | None) -> str | None:
    if totals is None:
        return None
    closed = Decimal(totals["matched"]) + Decimal(totals.get("resolved", "0"))
    whole = closed + Decimal(totals["unmatched"])
    return share(closed, whole) if whole else None


def _unmatched_amount(amounts: Mapping[str, Any], side: str) -> str | None:
    """A side's unmatched total, exact; per currency where the sides name currencies."""
    if set(amounts) <= set(SIDES):
        totals = amounts.get(side)
        return None if totals is None else str(totals["unmatched"])
    return ", ".join(
        f"{code or '(none)'} {per[side]['unmatched']}" for code, per in amounts.items() if per[side]
    )
