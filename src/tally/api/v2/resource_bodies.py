"""The resource listing's models (GET /api/v2/resources)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from tally.services.resource_listing import ListedFile, ResourceSummary


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
        )


class ResourceListResponse(BaseModel):
    data: list[ResourceResponse]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null on the last page."
    )
