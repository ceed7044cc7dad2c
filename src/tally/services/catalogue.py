"""Resources: create a source from a file, append files, keep its indexes built."""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column, ColumnType
from tally.core.errors import ConflictError
from tally.services.loader.load import LoadResult, ProgressCallback, load_into
from tally.storage import accounts, resource_tables, resources
from tally.storage.engine import write_connection
from tally.storage.resources import Resource

log = logging.getLogger("tally.catalogue")

# Spec (ingestion, part 1): a webhook-fed source starts with a placeholder column.
PLACEHOLDER_COLUMNS = (Column("placeholder", "c0", ColumnType.TEXT),)


def create_source(
    engine: Engine, *, workspace_id: int, name: str, folder_id: int | None = None
) -> Resource:
    with write_connection(engine) as conn, conn.begin():
        return _insert_placeholder_source(conn, workspace_id, name, folder_id)


def _insert_placeholder_source(
    conn: Connection, workspace_id: int, name: str, folder_id: int | None
) -> Resource:
    accounts.get_workspace(conn, workspace_id)
    if resources.find_resource_by_name(conn, workspace_id, name) is not None:
        raise ConflictError(f"a resource named {name!r} already exists in this workspace")
    resource = resources.insert_resource(
        conn,
        workspace_id=workspace_id,
        name=name,
        kind="source",
        columns=PLACEHOLDER_COLUMNS,
        is_placeholder=True,
        folder_id=folder_id,
        now=utc_now(),
    )
    resource_tables.create_table(conn, resource.table_name, PLACEHOLDER_COLUMNS)
    return resource


def create_source_from_file(
    engine: Engine,
    *,
    workspace_id: int,
    name: str,
    path: Path,
    on_progress: ProgressCallback | None = None,
) -> LoadResult:
    """A new source holding the file's rows; nothing is created when the file is bad."""
    with write_connection(engine) as conn, conn.begin():
        resource = _insert_placeholder_source(conn, workspace_id, name, None)
        result = load_into(conn, resource.id, path, on_progress)
    index_resource(engine, result.resource.id)
    return result


def append_file(
    engine: Engine, resource_id: int, path: Path, on_progress: ProgressCallback | None = None
) -> LoadResult:
    with write_connection(engine) as conn, conn.begin():
        result = load_into(conn, resource_id, path, on_progress)
    index_resource(engine, resource_id)
    return result


def index_resource(engine: Engine, resource_id: int) -> None:
    """Build the per-column indexes once the rows are committed (readers never wait)."""
    with write_connection(engine) as conn, conn.begin():
        resource = resources.lock_resource(conn, resource_id)
        built = resource.indexed_version == 0  # later loads maintain the indexes as they go
        if built:
            resource_tables.build_indexes(conn, resource.table_name, resource.columns)
        resources.record_indexed(conn, resource_id, resource.data_version)
    if built:
        resource_tables.vacuum(engine, resource.table_name)
        log.info("resource_indexed", extra={"resource_id": resource_id})
