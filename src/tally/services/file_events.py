"""File events: the outbox rows that status callbacks are made from.

Written in the transaction of the change they report (STYLE 8); the workers fan them
out to each source's callback endpoints (services/status_callbacks.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from tally.core.files import FileRecord
from tally.storage import files, outbox

ACCEPTED = "file.accepted"
DELIVERED = "file.delivered"
DUPLICATE = "file.duplicate"
FAILED = "file.failed"
RETRACTED = "file.retracted"  # a delivered file taken back: its rows removed (issue 32)


def file_event_data(file: FileRecord) -> dict[str, Any]:
    """The `data` of a status callback: the file as it is at the event."""
    return {
        "source_id": file.resource_id,
        "file_id": file.id,
        "filename": file.filename,
        "status": file.status,
        "rows": file.rows,
        "bytes": file.bytes,
        "sha256": file.sha256,
        "error": file.error,
        **({"retracted_by": file.retracted_by} if file.retracted_by is not None else {}),
    }


def queue_event(
    conn: Connection, *, event: str, resource_id: int, file: FileRecord, now: dt.datetime
) -> None:
    """Record a file event for status callbacks (fanned out by the workers).

    The payload snapshots the file as this transaction sees it (callers pass the record
    they claimed, from before their own update), so every retry sends the same body."""
    record_event(
        conn, event=event, resource_id=resource_id, current=files.get_file(conn, file.id), now=now
    )


def record_event(
    conn: Connection, *, event: str, resource_id: int, current: FileRecord, now: dt.datetime
) -> None:
    """`queue_event` for a caller whose record is the file as this transaction sees it."""
    outbox.add_events(conn, [_event_row(event, resource_id, current, now)])


def record_events(
    conn: Connection, *, event: str, records: Sequence[FileRecord], now: dt.datetime
) -> None:
    """`record_event` for many files at once, in one statement."""
    outbox.add_events(conn, event_rows(event, records, now))


def event_rows(event: str, records: Sequence[FileRecord], now: dt.datetime) -> list[dict[str, Any]]:
    """The outbox rows of one event about each of these files."""
    return [_event_row(event, record.resource_id, record, now) for record in records]


def _event_row(
    event: str, resource_id: int, current: FileRecord, now: dt.datetime
) -> dict[str, Any]:
    return dict(
        topic=outbox.STATUS_CALLBACK,
        type=event,
        resource_id=resource_id,
        file_id=current.id,
        payload=file_event_data(current),
        created_at=now,
    )
