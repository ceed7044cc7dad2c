"""Queries for a file's attempts that did not deliver it (table `file_attempts`), written
in the transaction that schedules the retry or fails the file."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection, insert, select

from tally.core.clock import as_utc
from tally.core.files import FileAttempt
from tally.storage.schema import file_attempts

MAX_LISTED = 100  # a file has at most TALLY_DELIVERY_MAX_ATTEMPTS; a bound all the same


def record_attempt(
    conn: Connection,
    file_id: int,
    *,
    attempt_number: int,
    error: str,
    now: dt.datetime,
    next_attempt_at: dt.datetime | None,
) -> None:
    conn.execute(
        insert(file_attempts).values(
            file_id=file_id,
            attempt_number=attempt_number,
            error=error,
            ended_at=now,
            next_attempt_at=next_attempt_at,
        )
    )


def list_attempts(conn: Connection, file_id: int) -> list[FileAttempt]:
    """The file's failed attempts, first first."""
    rows = conn.execute(
        select(file_attempts)
        .where(file_attempts.c.file_id == file_id)
        .order_by(file_attempts.c.id)
        .limit(MAX_LISTED)
    )
    return [
        FileAttempt(
            file_id=row.file_id,
            attempt_number=row.attempt_number,
            error=row.error,
            ended_at=as_utc(row.ended_at),
            next_attempt_at=as_utc(row.next_attempt_at) if row.next_attempt_at else None,
        )
        for row in rows
    ]
