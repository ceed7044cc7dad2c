"""Files fed as bytes (POST /api/v2/sources/{id}/feed-source): staged, then queued.

A body is staged in the blob store (streamed, hashed, size-limited), then its file row
and `file.accepted` event commit together. A refused upload leaves no bytes behind.
The HTTP layer turns the request into chunks (api/v2/multipart.py for multipart)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import IdempotencyKeyReusedError, InvalidUploadError, UploadTooLargeError
from tally.core.files import FileRecord, FileStatus
from tally.services import file_events, json_rows
from tally.services.catalogue import get_owned_source
from tally.storage import files
from tally.storage.blobs import BlobStore, StoredBlob
from tally.storage.engine import write_connection

UPLOAD_ORIGIN = "upload"


@dataclass(frozen=True)
class StagedFile:
    """An upload's bytes in the blob store, waiting for their file row."""

    blob: StoredBlob
    encoding: str | None = None  # None: the source's; CSV tally made from JSON is UTF-8


@dataclass(frozen=True)
class AcceptedUpload:
    file_id: int
    status: FileStatus
    created: bool  # False: an Idempotency-Key seen before; nothing new was queued


def limited(chunks: Iterable[bytes], max_bytes: int, what: str) -> Iterator[bytes]:
    """The chunks, raising UploadTooLargeError (naming `what`) past max_bytes."""
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise UploadTooLargeError(f"{what} is larger than the limit of {max_bytes} bytes")
        yield chunk


def _discard(path: Path) -> None:
    path.unlink(missing_ok=True)


class UploadService:
    def __init__(
        self,
        engine: Engine,
        blobs: BlobStore,
        *,
        max_file_bytes: int,
        deadline_seconds: float,
    ) -> None:
        self._engine = engine
        self._blobs = blobs
        self.max_file_bytes = max_file_bytes
        self._deadline_seconds = deadline_seconds

    def check_source(self, *, workspace_id: int, source_id: int) -> None:
        """404 unless this workspace owns the source (before the body is read)."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)

    def stage_csv(self, chunks: Iterable[bytes], *, what: str = "the body") -> StagedFile:
        """Stream CSV bytes into the blob store, refusing more than the file size limit."""
        return self._write(self._incoming_path(), limited(chunks, self.max_file_bytes, what))

    def stage_json(self, chunks: Iterable[bytes]) -> StagedFile:
        """Convert JSON rows to CSV (json_rows.RULES); body and CSV both within the limit."""
        path, what = self._incoming_path(), "the CSV converted from the JSON body"
        max_bytes = self.max_file_bytes
        with json_rows.json_to_csv(
            limited(chunks, max_bytes, "the body"), spill_dir=path.parent
        ) as csv:
            staged = self._write(path, limited(csv, max_bytes, what))
            return StagedFile(staged.blob, DEFAULT_ENCODING)

    def queue_upload(
        self,
        *,
        workspace_id: int,
        source_id: int,
        staged: StagedFile,
        filename: str | None,
        idempotency_key: str | None,
        by: str | None = None,
    ) -> AcceptedUpload:
        """The file row and its `file.accepted` event, in one transaction.

        The staged bytes become the file's blob; they are removed when nothing is queued
        (an error, or a retry whose Idempotency-Key already queued a file). A key that
        queued a different file (other bytes, file name or encoding, or a notification's
        file) is IdempotencyKeyReusedError (422): the body is read and hashed first, so a
        retry is told from a new file, never answered with the old one's id."""
        now, blob = utc_now(), staged.blob
        try:
            with write_connection(self._engine) as conn, conn.begin():
                get_owned_source(conn, workspace_id, source_id)
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
                    give_up_at=now + dt.timedelta(seconds=self._deadline_seconds),
                    encoding=staged.encoding,
                    uploaded_by=by,
                )
                record, created = files.insert_file(conn, row)
                if created:  # the record is the row just inserted
                    file_events.record_event(
                        conn,
                        event=file_events.ACCEPTED,
                        resource_id=source_id,
                        current=record,
                        now=now,
                    )
                else:
                    check_same_upload(record, row)
        except BaseException:
            _discard(blob.path)
            raise
        if not created:
            _discard(blob.path)
        return AcceptedUpload(record.id, record.status, created)

    def _incoming_path(self) -> Path:
        return self._blobs.incoming_path(f"{uuid.uuid4().hex}.data")

    def _write(self, path: Path, chunks: Iterable[bytes]) -> StagedFile:
        """BlobStore.write (which leaves nothing behind when the chunks raise); an empty
        file is refused and removed."""
        blob = self._blobs.write(path, chunks)
        if blob.size == 0:
            _discard(path)
            raise InvalidUploadError("the file is empty: a header line is required")
        return StagedFile(blob)


def check_same_upload(earlier: FileRecord, row: dict[str, Any]) -> None:
    """A retry sends the file its key first queued: the same bytes (their SHA-256), file
    name and encoding. Else IdempotencyKeyReusedError, naming the difference."""
    key = earlier.idempotency_key or ""
    if earlier.origin != UPLOAD_ORIGIN:
        raise IdempotencyKeyReusedError(key, f"it queued file {earlier.id} by a notification")
    if earlier.sha256 != row["sha256"]:
        raise IdempotencyKeyReusedError(key, f"it queued file {earlier.id} with other bytes")
    if earlier.filename != row["filename"]:
        named = "without a name" if earlier.filename is None else f"named {earlier.filename!r}"
        raise IdempotencyKeyReusedError(key, f"it queued file {earlier.id} {named}")
    if earlier.encoding != row["encoding"]:
        raise IdempotencyKeyReusedError(
            key, f"it queued file {earlier.id} from a body of another content type"
        )
