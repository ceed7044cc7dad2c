"""`ReconciliationSummaries`: one reconciliation as its console page shows it (issue #33's
screen 5; the workbench of the next issue grows from it): the reconciliation as
GET /api/v2/reconciliations/{id} gives it, its output and inputs as GET /api/v2/resources
lists them, and its figures from that same last run (reconciliation_figures.py). No row
of the output is read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tally.core.clock import utc_now
from tally.core.errors import ResourceNotFoundError
from tally.services.reconciliation.service import Reconciliation, ReconciliationService
from tally.services.reconciliation_figures import (
    AmountLine,
    ReconciliationFigures,
    amount_lines,
    reconciliation_figures,
)
from tally.services.resource_listing import ResourceListing, ResourceSummary

SIDES = ("left", "right")


@dataclass(frozen=True)
class SideInput:
    """One side: its name in the definition and the resource it reads (None: gone)."""

    side: str  # left or right
    name: str  # the definition's name for it (`bank`), the prefix of its output columns
    resource_id: int
    resource: ResourceSummary | None


@dataclass(frozen=True)
class ReconciliationSummary:
    reconciliation: Reconciliation
    output: ResourceSummary
    inputs: tuple[SideInput, SideInput]
    figures: ReconciliationFigures | None  # None before the first run

    @property
    def last_run(self) -> dict[str, Any] | None:
        return self.reconciliation.last_run

    @property
    def amounts(self) -> list[AmountLine]:
        return amount_lines(self.last_run or {})

    @property
    def started_at(self) -> dt.datetime | None:
        return self._moment("started_at")

    @property
    def finished_at(self) -> dt.datetime | None:
        return self._moment("finished_at")

    @property
    def duration_seconds(self) -> float | None:
        """How long the last run took, start to publication."""
        started, finished = self.started_at, self.finished_at
        return None if started is None or finished is None else (finished - started).total_seconds()

    def _moment(self, key: str) -> dt.datetime | None:
        found = (self.last_run or {}).get(key)
        return dt.datetime.fromisoformat(found) if found else None


class ReconciliationSummaries:
    def __init__(
        self,
        reconciliations: ReconciliationService,
        listing: ResourceListing,
        *,
        clock: Callable[[], dt.datetime] = utc_now,
    ) -> None:
        self._reconciliations = reconciliations
        self._listing = listing
        self._clock = clock

    def get(self, *, workspace_id: int, reconciliation_id: int) -> ReconciliationSummary:
        """ReconciliationNotFoundError for another workspace's, or none."""
        shown = self._reconciliations.get(workspace_id=workspace_id, derived_id=reconciliation_id)
        output = self._listing.get(workspace_id=workspace_id, resource_id=shown.resource_id)
        inputs = tuple(self._input(workspace_id, shown, side) for side in SIDES)
        sizes = {
            i.resource_id: (i.resource.rows, i.resource.data_version)
            for i in inputs
            if i.resource is not None
        }
        last_run = shown.last_run or {}
        figures = None
        if "counts" in last_run:
            figures = reconciliation_figures(last_run, sizes, self._clock().date())
        return ReconciliationSummary(shown, output, (inputs[0], inputs[1]), figures)

    def _input(self, workspace_id: int, shown: Reconciliation, side: str) -> SideInput:
        given = shown.definition[side]
        try:
            found: ResourceSummary | None = self._listing.get(
                workspace_id=workspace_id, resource_id=given["resource_id"]
            )
        except ResourceNotFoundError:
            found = None
        return SideInput(side, given["name"], given["resource_id"], found)
