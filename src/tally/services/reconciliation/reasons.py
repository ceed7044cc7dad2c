"""The `reason` text of every output row: what held for a match, what failed for the rest.

Money is exact decimal text at the run's scale; a date shift is the right row's date
relative to the left row's (`ledger date 2 days earlier`); sides are called by the
definition's names (`bank`, `ledger`), rows by position.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tally.services.reconciliation.state import Run


def money(value: int, scale: int) -> str:
    """A scaled integer as exact decimal text (-5 at scale 2 -> "-0.05")."""
    return str(Decimal(value).scaleb(-scale)) if scale else str(value)


def days(shift: int) -> str:
    """-2 -> "2 days earlier", 1 -> "1 day later", 0 -> "the same day"."""
    if shift == 0:
        return "the same day"
    unit = "day" if abs(shift) == 1 else "days"
    return f"{abs(shift)} {unit} {'later' if shift > 0 else 'earlier'}"


def window(bounds: tuple[int, int]) -> str:
    return f"window {bounds[0]}..{bounds[1]}"


def matched(
    run: Run,
    pass_index: int,
    difference: int | None,
    shifts: tuple[int, int] | None,
    counts: tuple[int, int],
    note: str | None,
) -> str:
    """`same reference: keys equal, amount equal, date equal` and the like."""
    if pass_index < 0:
        text = "manual: matched by an analyst"
        return f"{text} ({note})" if note else text
    match_pass = run.definition.passes[pass_index]
    parts = ["keys equal"] if match_pass.keys else []
    grouped = counts != (1, 1)
    if difference is not None:
        what = "sum" if grouped else "amount"
        if difference == 0:
            parts.append(f"{what} equal")
        else:
            tolerance = money(run.tolerance(match_pass), run.scale)
            parts.append(f"{what} differs by {money(abs(difference), run.scale)}")
            parts[-1] += f" (tolerance {tolerance})"
    if shifts is not None:
        parts.append(_dates(run, match_pass.date_window, shifts, grouped))
    return f"{match_pass.name}: {', '.join(parts) or 'matched'}"


def _dates(run: Run, bounds: tuple[int, int], shifts: tuple[int, int], grouped: bool) -> str:
    low, high = shifts
    plural = "dates" if grouped else "date"
    if low == high == 0:
        return f"{plural} equal"
    other = run.definition.right.name
    if low == high:
        return f"{other} {plural} {days(low)} ({window(bounds)})"
    return f"{other} dates {days(low)} to {days(high)} ({window(bounds)})"


def unmatched(run: Run) -> tuple[dict[int, str], dict[int, str]]:
    """A reason for every row in no match, per side: position -> text."""
    left = {run.left.positions[i]: "unmatched" for i in run.left.free()}
    right = {run.right.positions[i]: "unmatched" for i in run.right.free()}
    return left, right
