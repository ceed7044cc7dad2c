"""The resource listing's models (GET /api/v2/resources)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from tally.services.reconciliation_figures import ReconciliationFigures, SideFigures
from tally.services.resource_listing import DerivedSummary, ListedFile, ResourceSummary


class ResourceColumnResponse(BaseModel):
    name: str = Field(description="The column's label, as the Data API names it.")
    type: str = Field(description="text, integer, decimal, date, timestamp or boolean.")


class LastFileResponse(BaseModel):
    id: int
    status: str = Field(
        description="queued, downloading, loading, delivered, duplicate, failed or retracted."
    )
    filename: str | None
    received_at: dt.datetime
    finished_at: dt.datetime | None

    @classmethod
    def of(cls, listed: ListedFile) -> LastFileResponse:
        return cls(
            id=listed.id,
            status=listed.status,
            filename=listed.filename,
            received_at=listed.received_at,
            finished_at=listed.finished_at,
        )


class SideFiguresResponse(BaseModel):
    side: str = Field(description="left or right.")
    unmatched_rows: int
    resolved_rows: int = Field(
        description="The side's rows resolved by an analyst (closed with no counterpart)."
    )
    unmatched_amount: str | None = Field(
        description="The unmatched rows' total, exact; `EUR 1.00, GBP 2.00` where the sides "
        "name currencies; null without amounts."
    )
    reconciled_percent: str | None = Field(
        description="The side's rows closed (in a match of any status, suggestions too, or "
        "resolved by an analyst), in % of its rows, rounded down to 0.1 (`100.0` only "
        "when every row is); null once the input has changed since the run."
    )
    reconciled_by_value_percent: str | None = Field(
        description="The absolute amounts of those rows, in % of the absolute amounts of "
        "all the side's rows, rounded down to 0.1; per currency (`EUR 97.5, GBP 100.0`) "
        "where the sides name currencies; null without amounts, when they total 0, once "
        "the input has changed, or for a run made before tally kept them."
    )
    oldest_unmatched_date: dt.date | None = Field(
        description="The earliest date (the side's date column) among its unmatched rows; "
        "null when none has one, without a date column, or for a run made before tally "
        "kept it, or while it is not known (`oldest_unmatched_known`)."
    )
    oldest_unmatched_days: int | None = Field(description="Today (UTC) minus that date, in days.")
    oldest_unmatched_known: bool = Field(
        description="False while an analyst's action has closed every row of the earliest "
        "dates the run kept: the oldest date is not known until the next run."
    )

    @classmethod
    def of(cls, side: SideFigures) -> SideFiguresResponse:
        return cls(
            side=side.side,
            unmatched_rows=side.unmatched_rows,
            resolved_rows=side.resolved_rows,
            unmatched_amount=side.unmatched_amount,
            reconciled_percent=side.reconciled_percent,
            reconciled_by_value_percent=side.reconciled_by_value_percent,
            oldest_unmatched_date=side.oldest_unmatched_date,
            oldest_unmatched_days=side.oldest_unmatched_days,
            oldest_unmatched_known=side.oldest_unmatched_known,
        )


class ReconciliationFiguresResponse(BaseModel):
    matches: int = Field(description="Matches matched, with a difference, or manual.")
    suggested: int = Field(description="Suggested matches waiting for an analyst.")
    sides: list[SideFiguresResponse]
    has_value_and_age: bool = Field(
        description="False for a last run made before tally kept absolute amounts and "
        "unmatched dates: its shares by value and oldest items are not known until the "
        "next run."
    )

    @classmethod
    def of(cls, figures: ReconciliationFigures) -> ReconciliationFiguresResponse:
        return cls(
            matches=figures.matches,
            suggested=figures.suggested,
            sides=[SideFiguresResponse.of(side) for side in figures.sides],
            has_value_and_age=figures.has_value_and_age,
        )


class DerivedResponse(BaseModel):
    id: int = Field(
        description="The reconciliation's or transformation's id (/api/v2/reconciliations/{id})."
    )
    state: str = Field(description="queued, running, idle or failed.")
    error: str | None
    last_run_at: dt.datetime | None = Field(description="When its last run finished.")
    reconciliation: ReconciliationFiguresResponse | None = Field(
        description="A reconciliation's figures from its last run; null before it and for "
        "a transformation."
    )

    @classmethod
    def of(cls, derived: DerivedSummary) -> DerivedResponse:
        figures = derived.reconciliation
        return cls(
            id=derived.id,
            state=derived.state,
            error=derived.error,
            last_run_at=derived.last_run_at,
            reconciliation=ReconciliationFiguresResponse.of(figures) if figures else None,
        )


class ResourceResponse(BaseModel):
    id: int = Field(description="The resource's id in the Data API (/api/v1/resources/{id}/data).")
    kind: str = Field(description="source, reconciliation or transformation.")
    name: str
    columns: list[ResourceColumnResponse]
    rows: int
    data_version: int = Field(description="Bumped by every change of the resource's rows.")
    updated_at: dt.datetime = Field(description="When the resource or its rows last changed.")
    last_file: LastFileResponse | None = Field(
        description="A source's newest file; null for a source without files and for the "
        "outputs of reconciliations and transformations."
    )
    failed_files_7d: int | None = Field(
        description="A source's files that failed among those received in the last 7 days; "
        "null for outputs."
    )
    derived: DerivedResponse | None = Field(
        None,
        description="An output's reconciliation or transformation: its id, state and, for a "
        "reconciliation, its figures; null for a source.",
    )

    @classmethod
    def of(cls, summary: ResourceSummary) -> ResourceResponse:
        return cls(
            id=summary.id,
            kind=summary.kind,
            name=summary.name,
            columns=[
                ResourceColumnResponse(name=c.name, type=c.type.value) for c in summary.columns
            ],
            rows=summary.rows,
            data_version=summary.data_version,
            updated_at=summary.updated_at,
            last_file=LastFileResponse.of(summary.last_file) if summary.last_file else None,
            failed_files_7d=summary.failures,
            derived=DerivedResponse.of(summary.derived) if summary.derived else None,
        )


class ResourceListResponse(BaseModel):
    data: list[ResourceResponse]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null on the last page."
    )
