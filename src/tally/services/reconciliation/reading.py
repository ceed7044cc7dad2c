"""What a run reads of each side of a reconciliation: its key columns (its currency
among them), its amount (one column, or credit and debit) and its date; the runs and
the resolutions (which move a row's amount in last_run at once) read alike."""

from __future__ import annotations

from tally.core.columns import Column
from tally.core.errors import RunFailedError
from tally.core.reconciliation import ReconciliationDefinition, Side, SideName
from tally.services.reconciliation.matching import key_columns
from tally.storage.reconciliation_inputs import SideColumns
from tally.storage.resources import Resource


def side_columns(
    resource: Resource, definition: ReconciliationDefinition, which: SideName
) -> SideColumns:
    """What the engine reads of one side: its key columns (its currency among them),
    its amount (one column, or credit and debit) and date."""
    side = definition.side(which)
    amount = [_column(resource, side, name) for name in side.amount_columns()]
    return SideColumns(
        keys=tuple(_column(resource, side, name) for name in key_columns(definition, which)),
        amount=amount[0] if amount else None,
        date=_column(resource, side, side.date) if side.date else None,
        debit=amount[1] if len(amount) > 1 else None,
    )


def _column(resource: Resource, side: Side, name: str) -> Column:
    for column in resource.columns:
        if column.name == name:
            return column
    raise RunFailedError(f"{side.name}: resource {resource.id} has no column {name!r}")
