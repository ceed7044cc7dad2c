"""The upload flow: sources created by API (placeholder or typed), files fed as bytes.

An upload is staged in the blob store first (streamed, hashed, size-limited), then its
file row and `file.accepted` event are committed together; the worker loads it through
the same pipeline as a downloaded file. A refused upload leaves no bytes behind.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine, exc

from tally.core.clock import utc_now
from tally.core.columns import Column, ColumnType
from tally.core.errors import (
    DefinitionRejectedError,
    FieldProblem,
    StorageProvisioningError,
    TallyError,
)
from tally.core.sealing import SecretBox
from tally.services import json_rows
from tally.services.ingestion import (
    NotificationConfig,
    add_notification_endpoint,
    check_source_definition,
    create_placeholder_source,
    get_owned_source,
    queue_event,
)
from tally.storage import files, resource_tables, resources
from tally.storage.blobs import BlobStore, StoredBlob
from tally.storage.engine import write_connection
from tally.storage.files import FileRecord
from tally.storage.resources import Resource

DEFAULT_DECIMAL_SCALE = 2
UPLOAD_ORIGIN = "upload"


class UploadRejectedError(TallyError):
    """The upload was refused; nothing was stored or queued."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class UploadTooLargeError(UploadRejectedError):
    """The body (or the CSV converted from it) is larger than the file size limit."""


class InvalidUploadError(UploadRejectedError):
    """The body cannot be read as the content type it declares."""


# --- sources -------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnDefinition:
    name: str
    type: ColumnType
    scale: int | None = None  # decimal only; DEFAULT_DECIMAL_SCALE when None
    timezone: bool = False  # timestamp only


@dataclass(frozen=True)
class SourceDefinition:
    name: str
    folder_id: int | None = None
    columns: tuple[ColumnDefinition, ...] | None = None  # None: a placeholder source
    notification: NotificationConfig | None = None


def table_columns(definitions: Iterable[ColumnDefinition]) -> tuple[Column, ...]:
    """Declared columns as stored: physical names c0..cN in the declared order."""
    out = []
    for position, column in enumerate(definitions):
        scale = 0
        if column.type is ColumnType.DECIMAL:
            scale = DEFAULT_DECIMAL_SCALE if column.scale is None else column.scale
        timezone = column.timezone and column.type is ColumnType.TIMESTAMP
        out.append(Column(column.name, f"c{position}", column.type, scale, timezone))
    return tuple(out)


def _create_typed_source(
    conn: Connection,
    *,
    workspace_id: int,
    name: str,
    folder_id: int | None,
    columns: tuple[Column, ...],
    now: dt.datetime,
) -> Resource:
    """Like create_placeholder_source, but its table has the declared columns."""
    check_source_definition(conn, workspace_id, name, folder_id)
    try:
        with conn.begin_nested():
            resource = resources.insert_resource(
                conn,
                workspace_id=workspace_id,
                name=name,
                kind="source",
                columns=columns,
                is_placeholder=False,
                folder_id=folder_id,
                now=now,
            )
            resource_tables.create_table(conn, resource.table_name, columns)
    except exc.IntegrityError as error:  # a concurrent registration took the name
        raise DefinitionRejectedError(
            [FieldProblem("name", f"a source named {name!r} already exists")]
        ) from error
    except exc.DBAPIError as error:
        raise StorageProvisioningError() from error
    return resource


def create_source(
    engine: Engine, box: SecretBox, *, workspace_id: int, definition: SourceDefinition
) -> Resource:
    """The source, its table and its notification endpoint, in one transaction.

    Without columns it is a placeholder that takes its columns from the first file;
    with columns every file must bring exactly those (in any order).
    """
    now = utc_now()
    with write_connection(engine) as conn, conn.begin():
        if definition.columns is None:
            source = create_placeholder_source(
                conn,
                workspace_id=workspace_id,
                name=definition.name,
                folder_id=definition.folder_id,
                now=now,
            )
        else:
            source = _create_typed_source(
                conn,
                workspace_id=workspace_id,
                name=definition.name,
                folder_id=definition.folder_id,
                columns=table_columns(definition.columns),
                now=now,
            )
        add_notification_endpoint(conn, box, source.id, definition.notification, now)
    return source


# --- staging the bytes ---------------------------------------------------------------


def _limited(chunks: Iterable[bytes], max_bytes: int, what: str) -> Iterator[bytes]:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise UploadTooLargeError(f"{what} is larger than the limit of {max_bytes} bytes")
        yield chunk


def _incoming_path(blobs: BlobStore) -> Path:
    return blobs.incoming_path(f"{uuid.uuid4().hex}.data")


def _discard(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.with_suffix(path.suffix + ".part").unlink(missing_ok=True)  # BlobStore's temp


def _write(blobs: BlobStore, path: Path, chunks: Iterable[bytes]) -> StoredBlob:
    """BlobStore.write, leaving nothing behind when the chunks raise."""
    try:
        blob = blobs.write(path, chunks)
    except BaseException:
        _discard(path)
        raise
    if blob.size == 0:
        _discard(path)
        raise InvalidUploadError("the file is empty: a header line is required")
    return blob


def stage_csv(blobs: BlobStore, chunks: Iterable[bytes], *, max_bytes: int) -> StoredBlob:
    """Stream a CSV body into the blob store, refusing more than max_bytes."""
    return _write(blobs, _incoming_path(blobs), _limited(chunks, max_bytes, "the body"))


def stage_json(blobs: BlobStore, chunks: Iterable[bytes], *, max_bytes: int) -> StoredBlob:
    """Convert a JSON rows body to CSV (json_rows.RULES) into the blob store.

    Both the body and the CSV made from it are held to max_bytes."""
    path = _incoming_path(blobs)
    body = _limited(chunks, max_bytes, "the body")
    try:
        with json_rows.json_to_csv(body, spill_dir=path.parent) as csv_chunks:
            return _write(
                blobs, path, _limited(csv_chunks, max_bytes, "the CSV converted from the JSON body")
            )
    except json_rows.JsonRowsError as error:
        raise InvalidUploadError(error.message, field=error.field) from None


# --- queueing ------------------------------------------------------------------------


@dataclass(frozen=True)
class AcceptedUpload:
    file_id: int
    status: str
    created: bool  # False: an Idempotency-Key seen before; nothing new was queued


def find_earlier_upload(
    engine: Engine, *, workspace_id: int, source_id: int, idempotency_key: str | None
) -> FileRecord | None:
    """404 unless this workspace owns the source; the file an idempotency key queued."""
    with engine.connect() as conn:
        get_owned_source(conn, workspace_id, source_id)
        if idempotency_key is None:
            return None
        return files.find_by_idempotency_key(conn, source_id, idempotency_key)


def queue_upload(
    engine: Engine,
    *,
    workspace_id: int,
    source_id: int,
    blob: StoredBlob,
    filename: str | None,
    idempotency_key: str | None,
    deadline_seconds: float,
) -> AcceptedUpload:
    """The file row and its `file.accepted` event, in one transaction.

    The staged bytes become the file's blob; they are removed when nothing is queued
    (an error, or a retry whose Idempotency-Key already queued a file)."""
    now = utc_now()
    try:
        with write_connection(engine) as conn, conn.begin():
            get_owned_source(conn, workspace_id, source_id)
            record, created = files.insert_file(
                conn,
                resource_id=source_id,
                webhook_id=None,
                origin=UPLOAD_ORIGIN,
                url_encrypted=None,
                url_redacted=None,
                filename=filename,
                idempotency_key=idempotency_key,
                blob_path=str(blob.path),
                sha256=blob.sha256,
                size=blob.size,
                now=now,
                give_up_at=now + dt.timedelta(seconds=deadline_seconds),
            )
            if created:
                queue_event(
                    conn, event="file.accepted", resource_id=source_id, file=record, now=now
                )
    except BaseException:
        _discard(blob.path)
        raise
    if not created:
        _discard(blob.path)
    return AcceptedUpload(record.id, record.status, created)
