"""The upload flow: sources made by API (placeholder or typed), files fed as bytes.

A body is staged in the blob store (streamed, hashed, size-limited), then its file row
and `file.accepted` event commit together. A refused upload leaves no bytes behind."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.columns import Column, ColumnType
from tally.core.errors import InvalidUploadError, UploadTooLargeError
from tally.core.names import FILENAME_MAX_CHARS, has_control_characters
from tally.core.sealing import SecretBox
from tally.services import catalogue, ingestion, json_rows
from tally.storage import files
from tally.storage.blobs import BlobStore, StoredBlob
from tally.storage.engine import write_connection
from tally.storage.files import FileRecord
from tally.storage.resources import Resource

DEFAULT_DECIMAL_SCALE = 2
UPLOAD_ORIGIN = "upload"
MULTIPART_OVERHEAD_BYTES = 64 * 1024  # part headers and boundaries beyond the file


@dataclass(frozen=True)
class SourceDefinition:
    name: str
    folder_id: int | None = None
    columns: tuple[Column, ...] | None = None  # None: a placeholder source
    notification: ingestion.NotificationConfig | None = None


def declared_column(
    position: int, name: str, kind: ColumnType, *, scale: int | None, timezone: bool
) -> Column:
    """A declared column as stored: physical name c<position>, decimal scale 2 unless set."""
    if kind is not ColumnType.DECIMAL:
        scale = 0
    timezone = timezone and kind is ColumnType.TIMESTAMP
    scale = DEFAULT_DECIMAL_SCALE if scale is None else scale
    return Column(name, f"c{position}", kind, scale, timezone)


def create_source(
    engine: Engine, box: SecretBox, *, workspace_id: int, definition: SourceDefinition
) -> Resource:
    """The source, its table and its notification endpoint, in one transaction.

    Without columns it is a placeholder that takes its columns from the first file;
    with columns every file must bring exactly those (in any order).
    """
    now = utc_now()
    with write_connection(engine) as conn, conn.begin():
        source = catalogue.create_source_in(
            conn,
            workspace_id=workspace_id,
            name=definition.name,
            folder_id=definition.folder_id,
            columns=definition.columns,
        )
        ingestion.add_notification_endpoint(conn, box, source.id, definition.notification, now)
    return source


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


class _MultipartFile:
    """The bytes of the one part named `file` of a multipart/form-data body, streamed.

    Any other part is refused, like an extra field of a JSON body."""

    def __init__(self, chunks: Iterable[bytes], boundary: bytes) -> None:
        self.filename: str | None = None
        self._chunks = chunks
        self._out: list[bytes] = []
        self._header, self._disposition = [b"", b""], b""
        self._in_file = self._ended = False
        self._parser = MultipartParser(
            boundary,
            {
                "on_header_field": partial(self._grow, 0),
                "on_header_value": partial(self._grow, 1),
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._data,
                "on_end": partial(setattr, self, "_ended", True),
            },
        )

    def _grow(self, index: int, data: bytes, start: int, end: int) -> None:
        self._header[index] += data[start:end]

    def _header_end(self) -> None:
        field, value = self._header
        self._header = [b"", b""]
        if field.strip().lower() == b"content-disposition":
            self._disposition = value

    def _headers_finished(self) -> None:
        options = parse_options_header(self._disposition)[1]
        name = options.get(b"name", b"").decode(errors="replace")
        if name != "file" or self._in_file:
            what = "a second part 'file'" if name == "file" else f"an unexpected part {name!r}"
            raise InvalidUploadError(f"{what}: send the CSV as one part 'file'", field=name)
        self._in_file, self._disposition = True, b""
        filename = options.get(b"filename")
        self.filename = filename.decode(errors="replace")[:FILENAME_MAX_CHARS] if filename else None
        if self.filename is not None and has_control_characters(self.filename):
            raise InvalidUploadError(
                "the file name must not contain control characters", field=name
            )

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file and not self._ended:
            self._out.append(data[start:end])

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._chunks:
                self._parser.write(chunk)
                yield b"".join(self._out)
                self._out.clear()
            self._parser.finalize()
        except MultipartParseError as error:
            raise InvalidUploadError(f"malformed multipart body: {error}") from None
        if not self._ended or not self._in_file:
            problem = "ends before its last boundary" if self._in_file else "has no part 'file'"
            raise InvalidUploadError(f"the multipart body {problem}", field="file")


def stage_multipart(
    blobs: BlobStore, chunks: Iterable[bytes], *, boundary: bytes, max_bytes: int
) -> tuple[StoredBlob, str | None]:
    """Stream the `file` part of a multipart body into the blob store; with its filename."""
    part = _MultipartFile(
        _limited(chunks, max_bytes + MULTIPART_OVERHEAD_BYTES, "the body"), boundary
    )
    blob = _write(blobs, _incoming_path(blobs), _limited(part, max_bytes, "the file"))
    return blob, part.filename


def stage_json(blobs: BlobStore, chunks: Iterable[bytes], *, max_bytes: int) -> StoredBlob:
    """Convert JSON rows to CSV (json_rows.RULES); body and CSV both within max_bytes."""
    path, what = _incoming_path(blobs), "the CSV converted from the JSON body"
    with json_rows.json_to_csv(
        _limited(chunks, max_bytes, "the body"), spill_dir=path.parent
    ) as csv:
        return _write(blobs, path, _limited(csv, max_bytes, what))


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
        ingestion.get_owned_source(conn, workspace_id, source_id)
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
            ingestion.get_owned_source(conn, workspace_id, source_id)
            row = files.new_file_values(
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
            record, created = files.insert_file(conn, row)
            if created:  # the record is the row just inserted
                ingestion.record_event(
                    conn, event="file.accepted", resource_id=source_id, current=record, now=now
                )
    except BaseException:
        _discard(blob.path)
        raise
    if not created:
        _discard(blob.path)
    return AcceptedUpload(record.id, record.status, created)
