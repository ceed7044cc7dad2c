"""`ResourceListing`: a workspace's resources a page at a time, as the console's overview
and `GET /api/v2/resources` show them: kind, columns, rows, data version, last change,
and per source its last file and its failures of the last days. One snapshot per page;
no row of any resource is read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.errors import ResourceNotFoundError
from tally.core.files import FileRecord
from tally.storage import accounts, resource_listing
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
                )
            )
        next_after = summaries[-1].id if len(listed) > limit else None
        return ResourcePage(summaries, next_after)

    def get(self, *, workspace_id: int, resource_id: int) -> ResourceSummary:
        """One resource of the workspace; ResourceNotFoundError for another's or none."""
        page = self.list_page(workspace_id=workspace_id, after_id=resource_id - 1, limit=1)
        if not page.resources or page.resources[0].id != resource_id:
            raise ResourceNotFoundError()
        return page.resources[0]
