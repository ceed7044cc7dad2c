"""The Exceptions view's rows as it shows them: a page of one side's unmatched rows from
the Data API's answer (its values as the API gives them), each with its signed amount as
the engine compares it (the amount column, or credit minus debit, an empty cell counting
as zero unless both are empty: storage/reconciliation_inputs.py) as an integer at the
run's scale, its age in days, its reason; and the selection's sums and difference, as
manual.check_balance computes them (left sum minus right sum), in exact integers."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from tally.console.exceptions_view import reference_columns
from tally.core.columns import Column, ColumnType
from tally.core.reconciliation import CreditDebit, ReconciliationDefinition, Side, SideName
from tally.services.reconciliation.output_columns import DIFFERENCE, REASON, ROW
from tally.services.workspace_rows import RowsPage, row_values


@dataclass(frozen=True)
class OpenRow:
    side: SideName
    row: int  # its 1-based position in the side's input, as the API names it
    amount: str | None  # as the Data API gives it (credit and debit: the signed amount)
    scaled: int | None  # the signed amount at the run's scale, as the engine adds it
    date: str | None
    age_days: int | None
    references: list[str | None]
    reason: str | None


@dataclass(frozen=True)
class SideTotal:
    rows: int
    sum: str  # exact, at the run's scale
    has_missing: bool  # a row without amount: no difference to compute


@dataclass(frozen=True)
class Selection:
    left: SideTotal
    right: SideTotal
    difference: str | None  # left minus right; None when a row has no amount


def output_scale(columns: Iterable[Column]) -> int:
    """The run's common amount scale: the output's `difference` column has it."""
    return next((c.scale for c in columns if c.name == DIFFERENCE), 0)


def side_fields(definition: ReconciliationDefinition, which: SideName) -> list[str]:
    """The output columns a side's table reads: position, reason, references, amount
    columns, date."""
    side = definition.side(which)
    own = [*reference_columns(definition, which), *side.amount_columns()]
    if side.date:
        own.append(side.date)
    return [f"{side.name}.{ROW}", REASON, *dict.fromkeys(f"{side.name}.{c}" for c in own)]


def open_rows(
    page: RowsPage, definition: ReconciliationDefinition, which: SideName, today: dt.date
) -> list[OpenRow]:
    side = definition.side(which)
    scale = output_scale(page.columns)
    by_name = {c.name: c for c in page.columns}
    names = side_fields(definition, which)
    references = [f"{side.name}.{c}" for c in reference_columns(definition, which)]
    shown = []
    for text in page.rows:
        values = dict(zip(names, row_values(text, names), strict=True))
        scaled = signed_amount(side, values, scale)
        date = values.get(f"{side.name}.{side.date}") if side.date else None
        date_column = by_name.get(f"{side.name}.{side.date}")
        shown.append(
            OpenRow(
                side=which,
                row=int(values[f"{side.name}.{ROW}"] or 0),
                amount=_amount_text(side, values, scaled, scale),
                scaled=scaled,
                date=date,
                age_days=_age(date, date_column, today),
                references=[values[r] for r in references],
                reason=values[REASON],
            )
        )
    return shown


def signed_amount(side: Side, values: Mapping[str, str | None], scale: int) -> int | None:
    """The row's amount as the engine reads it, an integer at `scale`."""
    if side.amount is None:
        return None
    if isinstance(side.amount, CreditDebit):
        credit = values.get(f"{side.name}.{side.amount.credit}")
        debit = values.get(f"{side.name}.{side.amount.debit}")
        if credit is None and debit is None:
            return None
        return _scaled(credit or "0", scale) - _scaled(debit or "0", scale)
    found = values.get(f"{side.name}.{side.amount}")
    return None if found is None else _scaled(found, scale)


def _scaled(text: str, scale: int) -> int:
    """Decimal text times 10**scale, exactly (the shift is on the exponent: nothing is
    rounded, however many digits)."""
    sign, digits, exponent = Decimal(text).as_tuple()
    assert isinstance(exponent, int)
    return int(Decimal((sign, digits, exponent + scale)))


def money(value: int, scale: int) -> str:
    """A scaled integer as decimal text with `scale` digits after the point (the same
    text static/workbench_exceptions.js writes): -5 at scale 2 is -0.05."""
    digits = str(abs(value)).rjust(scale + 1, "0")
    whole, fraction = (digits[:-scale], digits[-scale:]) if scale else (digits, "")
    return ("-" if value < 0 else "") + whole + (f".{fraction}" if fraction else "")


def _amount_text(
    side: Side, values: Mapping[str, str | None], scaled: int | None, scale: int
) -> str | None:
    if isinstance(side.amount, CreditDebit):
        return None if scaled is None else money(scaled, scale)
    return values.get(f"{side.name}.{side.amount}") if side.amount else None


def _age(date: str | None, column: Column | None, today: dt.date) -> int | None:
    """Today minus the row's date, in days (a timestamp's date in UTC)."""
    if date is None or column is None:
        return None
    if column.type is ColumnType.DATE:
        day = dt.date.fromisoformat(date)
    else:
        moment = dt.datetime.fromisoformat(date)
        day = (moment if moment.tzinfo is None else moment.astimezone(dt.UTC)).date()
    return (today - day).days


def selection(chosen: Mapping[SideName, Sequence[int | None]], scale: int) -> Selection:
    """Each side's count and sum, and the difference (left minus right), as
    manual.check_balance adds them; no difference when a row has no amount."""
    totals = {}
    for which in SideName:
        amounts = chosen.get(which, ())
        known = [a for a in amounts if a is not None]
        totals[which] = (len(amounts), sum(known), len(known) < len(amounts))
    left, right = totals[SideName.LEFT], totals[SideName.RIGHT]
    missing = left[2] or right[2]
    return Selection(
        SideTotal(left[0], money(left[1], scale), left[2]),
        SideTotal(right[0], money(right[1], scale), right[2]),
        None if missing else money(left[1] - right[1], scale),
    )
