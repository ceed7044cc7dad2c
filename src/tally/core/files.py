"""A file's record and its status: what the ingestion API reports and the workers move on.

A frozen dataclass read from storage (`from_row`) and handed up to the API, so entry
points never import storage to name it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tally.core.clock import as_utc


class FileStatus(StrEnum):
    """A file's place in the pipeline; the values are stored and shown as they are."""

    QUEUED = "queued"
    DOWNLOADING = "downloading"
    LOADING = "loading"
    DELIVERED = "delivered"
    DUPLICATE = "duplicate"
    FAILED = "failed"
    RETRACTED = "retracted"  # delivered, then taken back: its rows removed (issue 32)


FINAL_STATUSES = (FileStatus.DELIVERED, FileStatus.DUPLICATE, FileStatus.FAILED)
ACTIVE_STATUSES = (FileStatus.QUEUED, FileStatus.DOWNLOADING, FileStatus.LOADING)


@dataclass(frozen=True)
class FileRecord:
    id: int
    resource_id: int
    webhook_id: int | None
    origin: str
    url_encrypted: str | None
    url_redacted: str | None
    filename: str | None
    idempotency_key: str | None
    status: FileStatus
    attempts: int
    error: str | None
    rows: int | None
    bytes: int | None
    sha256: str | None
    blob_path: str | None
    give_up_at: dt.datetime
    lease_owner: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    encoding: str | None = None  # of the bytes, when not the source's (decision 0015)
    warnings: list[str] | None = None  # what the load noticed without failing the file
    retracted_at: dt.datetime | None = None  # when a delivered file was taken back
    retracted_by: str | None = None  # by whom: `api key sha256:...`, `tally admin`
    uploaded_by: str | None = None  # an upload's sender: a console user's name, or the key's

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> FileRecord:
        """The record of a row about to be inserted (its id given): a column the values
        leave out is NULL."""
        fields: dict[str, Any] = {name: values.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)

    @classmethod
    def from_row(cls, row: Any) -> FileRecord:
        values = {name: getattr(row, name) for name in cls.__dataclass_fields__}
        # SQLite hands datetimes back naive; every one tally stores is UTC.
        for name, value in values.items():
            if isinstance(value, dt.datetime):
                values[name] = as_utc(value)
        values["status"] = FileStatus(values["status"])
        return cls(**values)


@dataclass(frozen=True)
class FileAttempt:
    """An attempt that did not deliver a file: its error, when it ended, and when the next
    was due (None: the file failed for good with it)."""

    file_id: int
    attempt_number: int
    error: str
    ended_at: dt.datetime
    next_attempt_at: dt.datetime | None
