"""A workspace's resources listed a page at a time, with what the overview tells of each:
a source's last file and its failed files since a moment, an output's derived resource
and its inputs' sizes. Callers own the transaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from tally.core.clock import as_utc
from tally.core.files import FileRecord, FileStatus
from tally.storage.derived.records import DerivedRecord
from tally.storage.resources import Resource
from tally.storage.schema import MAX_ID, derived_resources, files, resources


@dataclass(frozen=True)
class ListedResource:
    resource: Resource
    updated_at: dt.datetime


def list_resources(
    conn: Connection, workspace_id: int, *, after_id: int, limit: int
) -> list[ListedResource]:
    """The workspace's resources with ids above `after_id`, by id, at most `limit`."""
    rows = conn.execute(
        select(resources)
        .where(resources.c.workspace_id == workspace_id, resources.c.id > min(after_id, MAX_ID))
        .order_by(resources.c.id)
        .limit(limit)
    )
    return [ListedResource(Resource.from_row(row), as_utc(row.updated_at)) for row in rows]


def last_files(conn: Connection, resource_ids: Collection[int]) -> dict[int, FileRecord]:
    """Each resource's newest file (the highest id: the last to arrive), if it has one."""
    if not resource_ids:
        return {}
    newest = (
        select(func.max(files.c.id))
        .where(files.c.resource_id.in_(list(resource_ids)))
        .group_by(files.c.resource_id)
    )
    rows = conn.execute(select(files).where(files.c.id.in_(newest)))
    return {row.resource_id: FileRecord.from_row(row) for row in rows}


def count_failures(
    conn: Connection, resource_ids: Collection[int], since: dt.datetime
) -> dict[int, int]:
    """Per resource, its files that failed and arrived at or after `since`."""
    if not resource_ids:
        return {}
    rows = conn.execute(
        select(files.c.resource_id, func.count())
        .where(
            files.c.resource_id.in_(list(resource_ids)),
            files.c.status == FileStatus.FAILED.value,
            files.c.created_at >= since,
        )
        .group_by(files.c.resource_id)
    )
    return {row[0]: int(row[1]) for row in rows}


def derived_of_outputs(conn: Connection, resource_ids: Collection[int]) -> dict[int, DerivedRecord]:
    """The reconciliation or transformation each output resource is published by."""
    if not resource_ids:
        return {}
    rows = conn.execute(
        select(derived_resources).where(derived_resources.c.resource_id.in_(list(resource_ids)))
    )
    return {row.resource_id: DerivedRecord.from_row(row) for row in rows}


def sizes(conn: Connection, resource_ids: Collection[int]) -> dict[int, tuple[int, int]]:
    """Each resource's row count and data version."""
    if not resource_ids:
        return {}
    rows = conn.execute(
        select(resources.c.id, resources.c.row_count, resources.c.data_version).where(
            resources.c.id.in_(list(resource_ids))
        )
    )
    return {row.id: (int(row.row_count), int(row.data_version)) for row in rows}
