"""Queries for the resources catalogue: owner, columns, row count and data version."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, Engine, delete, exc, insert, select, update

from tally.core.columns import Column, system_columns
from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import (
    ResourceNameTakenError,
    ResourceNotFoundError,
    StorageProvisioningError,
)
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl, row_json
from tally.storage.schema import is_storable_id, resources

APPEND = "append"  # a source's files add rows (the default)
REPLACE = "replace"  # each file replaces every row: a daily snapshot (issue 32)
SOURCE_MODES = (APPEND, REPLACE)


@dataclass(frozen=True)
class Resource:
    id: int
    workspace_id: int
    folder_id: int | None
    name: str
    kind: str
    columns: tuple[Column, ...]
    is_placeholder: bool
    data_version: int
    row_count: int
    indexed_version: int
    # data version whose rows all have the JSON text their kind keeps: a source every
    # row's (decision 0011), a derived output none (set as it is published)
    rendered_version: int
    encoding: str = DEFAULT_ENCODING  # of the source's files (decision 0015)
    layout: FileLayout = PLAIN_LAYOUT  # lines skipped, declared formats (issue 32)
    mode: str = APPEND  # a source's files append rows, or replace them all (snapshots)
    removed_version: int = 0  # data version at which rows were last removed; 0: never

    @property
    def replaces_rows(self) -> bool:
        return self.mode == REPLACE

    @property
    def table_name(self) -> str:
        return table_name_for(self.id)

    @property
    def has_file_ids(self) -> bool:
        """A source's rows say which file inserted them (`_file_id`); a derived
        output's rows come from no file."""
        return self.kind == SOURCE_KIND

    @property
    def system_columns(self) -> tuple[Column, ...]:
        return system_columns(has_files=self.has_file_ids)

    @classmethod
    def from_row(cls, row: Any) -> Resource:
        return cls(
            id=row.id,
            workspace_id=row.workspace_id,
            folder_id=row.folder_id,
            name=row.name,
            kind=row.kind,
            columns=tuple(Column.from_json(c) for c in row.columns),
            is_placeholder=bool(row.is_placeholder),
            data_version=int(row.data_version),
            row_count=int(row.row_count),
            indexed_version=int(row.indexed_version),
            rendered_version=int(row.rendered_version),
            encoding=row.encoding,
            layout=FileLayout.from_json(row.file_layout),
            mode=row.mode,
            removed_version=int(row.removed_version),
        )


SOURCE_KIND = "source"


def table_name_for(resource_id: int) -> str:
    return f"r_{resource_id}"


def create_resource(
    conn: Connection,
    *,
    workspace_id: int,
    name: str,
    kind: str,
    columns: tuple[Column, ...],
    is_placeholder: bool,
    folder_id: int | None,
    now: dt.datetime,
    encoding: str = DEFAULT_ENCODING,
    layout: FileLayout = PLAIN_LAYOUT,
    mode: str = APPEND,
) -> Resource:
    """The resource and its empty table, in a savepoint of `conn`'s transaction: a
    concurrent taker of the name is ResourceNameTakenError, a table the database will not
    make StorageProvisioningError (502), so no driver error reaches the service."""
    try:
        with conn.begin_nested():
            resource_id = conn.execute(
                insert(resources)
                .values(
                    workspace_id=workspace_id,
                    folder_id=folder_id,
                    name=name,
                    kind=kind,
                    columns=[c.to_json() for c in columns],
                    is_placeholder=is_placeholder,
                    data_version=0,
                    row_count=0,
                    indexed_version=0,
                    rendered_version=0,
                    encoding=encoding,
                    file_layout=layout.to_json(),
                    mode=mode,
                    created_at=now,
                    updated_at=now,
                )
                .returning(resources.c.id)
            ).scalar_one()
            resource = Resource(
                resource_id,
                workspace_id,
                folder_id,
                name,
                kind,
                columns,
                is_placeholder,
                0,
                0,
                0,
                0,
                encoding,
                layout,
                mode,
            )
            ddl.create_table(conn, resource.table_name, columns, file_ids=resource.has_file_ids)
    except exc.IntegrityError as error:
        raise ResourceNameTakenError(name) from error
    except exc.DBAPIError as error:
        raise StorageProvisioningError() from error
    return resource


def find_resource(conn: Connection, resource_id: int) -> Resource | None:
    if not is_storable_id(resource_id):
        return None
    row = conn.execute(select(resources).where(resources.c.id == resource_id)).first()
    return Resource.from_row(row) if row else None


def get_resource(conn: Connection, resource_id: int) -> Resource:
    resource = find_resource(conn, resource_id)
    if resource is None:
        raise ResourceNotFoundError()
    return resource


def lock_resource(conn: Connection, resource_id: int) -> Resource:
    """Read the resource and hold its row lock until commit (one loader at a time).

    FOR NO KEY UPDATE, not FOR UPDATE: a row referring to the resource (a notified
    file, an outbox event) is checked under KEY SHARE, which FOR UPDATE would keep
    waiting for a whole load or index build, and the intake with it."""
    stmt = select(resources).where(resources.c.id == resource_id)
    if backend_of(conn).is_postgresql:
        stmt = stmt.with_for_update(key_share=True)
    row = conn.execute(stmt).first()
    if row is None:
        raise ResourceNotFoundError()
    return Resource.from_row(row)


def find_resource_by_name(conn: Connection, workspace_id: int, name: str) -> Resource | None:
    row = conn.execute(
        select(resources).where(resources.c.workspace_id == workspace_id, resources.c.name == name)
    ).first()
    return Resource.from_row(row) if row else None


def rename_resource(conn: Connection, resource_id: int, name: str, now: dt.datetime) -> None:
    conn.execute(
        update(resources).where(resources.c.id == resource_id).values(name=name, updated_at=now)
    )


def delete_resource(conn: Connection, resource_id: int) -> None:
    """The catalogue's row (its table and its events are the caller's to drop first)."""
    conn.execute(delete(resources).where(resources.c.id == resource_id))


def record_load(
    conn: Connection,
    resource: Resource,
    *,
    columns: tuple[Column, ...],
    added_rows: int,
    now: dt.datetime,
) -> Resource:
    """Bump the data version and row count in the loader's transaction."""
    version = resource.data_version + 1
    conn.execute(
        update(resources)
        .where(resources.c.id == resource.id)
        .values(
            columns=[c.to_json() for c in columns],
            is_placeholder=False,
            data_version=version,
            row_count=resource.row_count + added_rows,
            updated_at=now,
        )
    )
    return replace(
        resource,
        columns=columns,
        is_placeholder=False,
        data_version=version,
        row_count=resource.row_count + added_rows,
    )


def record_removal(
    conn: Connection,
    resource: Resource,
    *,
    removed_rows: int,
    now: dt.datetime,
    indexes_dropped: bool = False,
) -> Resource:
    """Rows were removed, in the caller's transaction: a new data version, which is also
    the `removed_version` (incremental runs then read the whole resource again).
    `indexes_dropped`: the per-column indexes are to be built again, by a worker."""
    version = resource.data_version + 1
    count = resource.row_count - removed_rows
    indexed = 0 if indexes_dropped else resource.indexed_version
    conn.execute(
        update(resources)
        .where(resources.c.id == resource.id)
        .values(
            data_version=version,
            removed_version=version,
            row_count=count,
            indexed_version=indexed,
            updated_at=now,
        )
    )
    return replace(
        resource,
        data_version=version,
        removed_version=version,
        row_count=count,
        indexed_version=indexed,
    )


def next_unfinished(conn: Connection, skip: Collection[int] = ()) -> int | None:
    """A source with rows whose indexes were never built, or whose latest rows have
    no stored JSON text yet, if any (the oldest first), other than those in `skip`. A
    derived output's run stores and indexes its own (storage/derived/outputs.py)."""
    stmt = (
        select(resources.c.id)
        .where(resources.c.data_version > 0, resources.c.is_placeholder.is_(False))
        .where(resources.c.kind == SOURCE_KIND)
        .where(
            (resources.c.indexed_version == 0)
            | (resources.c.rendered_version != resources.c.data_version)
        )
        .order_by(resources.c.id)
        .limit(1)
    )
    if skip:
        stmt = stmt.where(resources.c.id.not_in(sorted(skip)))
    return conn.execute(stmt).scalar()


def store_missing_text(
    engine: Engine, resource: Resource, guard: Callable[[Connection], None] | None = None
) -> int:
    """Give the resource's rows without stored JSON text their text (decision 0011; in
    short transactions, `guard` first in each), then record that its data version as
    read has all of it (rows of a load that committed since are taken up by the next
    round); how many rows were given one."""
    stored = row_json.store_row_json(engine, resource.table_name, resource.columns, guard)
    with write_connection(engine) as conn, conn.begin():
        if guard is not None:
            guard(conn)
        record_rendered(conn, resource.id, resource.data_version)
    return stored


def record_rendered(conn: Connection, resource_id: int, version: int) -> None:
    conn.execute(
        update(resources).where(resources.c.id == resource_id).values(rendered_version=version)
    )


def record_indexed(conn: Connection, resource_id: int, version: int) -> None:
    conn.execute(
        update(resources).where(resources.c.id == resource_id).values(indexed_version=version)
    )
