"""The `reason` text of every output row: what held for a match, what failed for the rest.

Money is exact decimal text at the run's scale; a date shift is the right row's date
relative to the left row's (`ledger date 2 days earlier`); sides are called by the
definition's names (`bank`, `ledger`), rows by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from tally.core.reconciliation import MatchPass

if TYPE_CHECKING:
    from tally.services.reconciliation.state import Run, Side


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
        if difference:  # (kept on the match: the analyst's note says why)
            what = "sum" if counts != (1, 1) else "amount"
            text += f", {what} differs by {money(abs(difference), run.scale)}"
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


def resolved(code: str, note: str | None) -> str:
    """`resolved: bank_fee, by an analyst (monthly fee)`: a row closed with no counterpart."""
    text = f"resolved: {code}, by an analyst"
    return f"{text} ({note})" if note else text


def paired_later(note: str | None) -> str:
    """A row of a manual match shown at once, until the run the match queued pairs it
    with the match's other rows (and gives the match's difference)."""
    text = "manual: matched by an analyst; the next run pairs the rows"
    return f"{text} ({note})" if note else text


def reopened(note: str | None) -> str:
    """A resolved row reopened, until the run the undo queued gives its reason."""
    text = "unmatched: a resolution was undone by an analyst; the next run gives the reason"
    return f"{text} ({note})" if note else text


def key_values(run: Run, side: Side, i: int, match_pass: MatchPass) -> str:
    """The row's own key values for the pass, as in `ledger row 812 (reference REF-7)`."""
    return ", ".join(f"{column} {value}" for column, value in _keys(run, side, i, match_pass))


def key_quoted(run: Run, side: Side, i: int, match_pass: MatchPass) -> str:
    """The row's key values (before normalising) named by the other side's columns, as in
    `no ledger row with reference 'INV-9'` for a bank row."""
    other = run.opposite(side)
    named = zip(_columns(run, other, match_pass), _keys(run, side, i, match_pass), strict=True)
    return " and ".join(f"{column} '{value}'" for column, (_, value) in named)


def _columns(run: Run, side: Side, match_pass: MatchPass) -> list[str]:
    return [pair.left if side is run.left else pair.right for pair in match_pass.keys]


def _keys(run: Run, side: Side, i: int, match_pass: MatchPass) -> list[tuple[str, str]]:
    out = []
    for column in _columns(run, side, match_pass):
        value = side.key_values[side.key_columns.index(column)][i]
        out.append((column, "(empty)" if value is None else value))
    return out


def rows(side: Side, indices: Sequence[int], limit: int = 5) -> str:
    """`ledger row 5`, `ledger rows 5, 8, 9`, `ledger rows 5, 8, 9, 12, 13 and 4 more`."""
    if len(indices) == 1:
        return f"{side.label} row {side.positions[indices[0]]}"
    shown = ", ".join(str(side.positions[i]) for i in indices[:limit])
    more = f" and {len(indices) - limit} more" if len(indices) > limit else ""
    return f"{side.label} rows {shown}{more}"


def shared_key(run: Run, pass_index: int, one: Side, sharing: Sequence[int]) -> str:
    match_pass = run.definition.passes[pass_index]
    many = run.opposite(one)
    keys = " and ".join(f"{c} '{v}'" for c, v in _keys(run, one, sharing[0], match_pass))
    if one.currencies is not None:  # (a group is the rows of one currency)
        keys += f" in {one.currencies[sharing[0]]}"
    return (
        f"{match_pass.name}: {len(sharing)} {one.label} rows share {keys} "
        f"({rows(one, sharing)}); "
        f"the pass matches one {one.label} row to many {many.label} rows"
    )


def rejected_group(
    run: Run, pass_index: int, one: Side, i: int, many: Side, members: Sequence[int]
) -> str:
    match_pass = run.definition.passes[pass_index]
    return (
        f"{match_pass.name}: {rows(one, [i])} ({key_values(run, one, i, match_pass)}) "
        f"with {rows(many, members)}: an analyst rejected this match"
    )


def group_sum(
    run: Run, pass_index: int, one: Side, i: int, many: Side, members: Sequence[int]
) -> str:
    match_pass = run.definition.passes[pass_index]
    amount: int = one.amounts[i]  # type: ignore[assignment]
    total: int = sum(many.amounts[j] for j in members)  # type: ignore[misc]
    return (
        f"{match_pass.name}: {rows(one, [i])} ({key_values(run, one, i, match_pass)}) "
        f"amount {money(amount, run.scale)}, {rows(many, members)} sum "
        f"{money(total, run.scale)}: differ by {money(abs(amount - total), run.scale)}, "
        f"tolerance {money(run.tolerance(match_pass), run.scale)}"
    )
