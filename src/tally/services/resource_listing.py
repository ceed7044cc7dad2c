"""`ResourceListing`: a workspace's resources a page at a time, as the console's overview
and `GET /api/v2/resources` show them: kind, columns, rows, data version, last change,
per source its last file and its failures of the last days, per output its run's state
and a reconciliation's figures (reconciliation_figures.py). One snapshot per page; no
row of any resource is read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.errors import ResourceNotFoundError
from tally.core.files import FileRecord
from tally.services.reconciliation_figures import ReconciliationFigures, reconciliation_figures
from tally.storage import accounts, resource_listing
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import snapshot_connection
from tally.storage.resources import SOURCE_KIND

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 500
FAILURE_DAYS = 7


@dataclass(frozen=True)
class ListedFile:
    id: int
    status: str
    filename: str | None
    received_at: dt.datetime
    finished_at: dt.datetime | None

    @classmethod
    def of(cls, record: FileRecord) -> ListedFile:
        return cls(
            record.id, record.status.value, record.filename, record.created_at, record.finished_at
        )


@dataclass(frozen=True)
class DerivedSummary:
    """The reconciliation or transformation an output is published by, and its state."""

    id: int
    state: str  # queued, running, idle, failed
    error: str | None
    last_run_at: dt.datetime | None  # the last run's finish
    reconciliation: ReconciliationFigures | None


@dataclass(frozen=True)
class ResourceSummary:
    id: int
    kind: str
    name: str
    columns: tuple[Column, ...]
    rows: int
    data_version: int
    updated_at: dt.datetime
    last_file: ListedFile | None  # sources only
    failures: int | None  # a source's failed files of the last FAILURE_DAYS days
    derived: DerivedSummary | None = None  # an output's reconciliation or transformation


@dataclass(frozen=True)
class ResourcePage:
    resources: list[ResourceSummary]
    next_after: int | None  # the `after` of the next page; None on the last


class ResourceListing:
    def __init__(self, engine: Engine, *, clock: Callable[[], dt.datetime] = utc_now) -> None:
        self._engine = engine
        self._clock = clock

    def list_page(
        self, *, workspace_id: int, after_id: int = 0, limit: int = DEFAULT_PAGE_SIZE
    ) -> ResourcePage:
        """The resources with ids above `after_id`; WorkspaceNotFoundError for none."""
        limit = max(1, min(limit, MAX_PAGE_SIZE))
        since = self._clock() - dt.timedelta(days=FAILURE_DAYS)
        with snapshot_connection(self._engine) as conn, conn.begin():
            accounts.get_workspace(conn, workspace_id)
            listed = resource_listing.list_resources(
                conn, workspace_id, after_id=after_id, limit=limit + 1
            )
            sources = [
                item.resource.id for item in listed[:limit] if item.resource.kind == SOURCE_KIND
            ]
            last = resource_listing.last_files(conn, sources)
            failures = resource_listing.count_failures(conn, sources, since)
            outputs = [
                item.resource.id for item in listed[:limit] if item.resource.kind != SOURCE_KIND
            ]
            derived = resource_listing.derived_of_outputs(conn, outputs)
            sizes = resource_listing.sizes(conn, _inputs_of(derived.values()))
        today = self._clock().date()
        summaries = []
        for item in listed[:limit]:
            resource = item.resource
            is_source = resource.kind == SOURCE_KIND
            file = last.get(resource.id)
            summaries.append(
                ResourceSummary(
                    id=resource.id,
                    kind=resource.kind,
                    name=resource.name,
                    columns=resource.columns,
                    rows=resource.row_count,
                    data_version=resource.data_version,
                    updated_at=item.updated_at,
                    last_file=ListedFile.of(file) if file else None,
                    failures=failures.get(resource.id, 0) if is_source else None,
                    derived=_derived(derived.get(resource.id), sizes, today),
                )
            )
        next_after = summaries[-1].id if len(listed) > limit else None
        return ResourcePage(summaries, next_after)

    def get(
        self, *, workspace_id: int, resource_id: int, kind: str | None = None
    ) -> ResourceSummary:
        """One resource of the workspace (of `kind`, when given); ResourceNotFoundError
        for another workspace's, another kind's, or none."""
        page = self.list_page(workspace_id=workspace_id, after_id=resource_id - 1, limit=1)
        found = page.resources[0] if page.resources else None
        if found is None or found.id != resource_id or kind not in (None, found.kind):
            raise ResourceNotFoundError()
        return found


def _inputs_of(records: Iterable[DerivedRecord]) -> list[int]:
    found = []
    for record in records:
        inputs = (record.last_run or {}).get("inputs") or {}
        found += [side["resource_id"] for side in inputs.values() if "resource_id" in side]
    return found


def _derived(
    record: DerivedRecord | None, sizes: Mapping[int, tuple[int, int]], today: dt.date
) -> DerivedSummary | None:
    if record is None:
        return None
    last_run = record.last_run or {}
    figures = None
    if record.kind == "reconciliation" and "counts" in last_run:
        figures = reconciliation_figures(last_run, sizes, today)
    finished = last_run.get("finished_at")
    return DerivedSummary(
        record.id,
        record.state,
        record.error,
        dt.datetime.fromisoformat(finished) if finished else None,
        figures,
    )
