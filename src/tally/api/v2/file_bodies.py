"""The file API's models (GET /api/v2/sources/{id}/files[/{file_id}[/attempts]])."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from tally.core.files import FileAttempt, FileRecord


class FileStatusResponse(BaseModel):
    id: int
    source_id: int
    origin: str = Field(description="webhook or upload")
    filename: str | None
    url: str | None = Field(description="The file URL without its query string.")
    status: str = Field(
        description="queued, downloading, loading, delivered, duplicate or failed (the "
        "last three end the file's loading), or retracted: delivered, then taken back "
        "(DELETE), its rows removed."
    )
    attempts: int
    error: str | None
    warnings: list[str] = Field(
        description="What the load noticed without failing the file: a column kept as "
        "text whose values are dates in a format tally does not guess (which formats fit, "
        "and how to declare one). Empty when nothing."
    )
    rows: int | None
    bytes: int | None
    sha256: str | None
    idempotency_key: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    retracted_at: dt.datetime | None = Field(
        description="When the file was taken back; null unless retracted."
    )
    retracted_by: str | None = Field(
        description="Who took it back: `api key sha256:...` (the key's fingerprint) or "
        "`tally admin`; null unless retracted."
    )
    uploaded_by: str | None = Field(
        description="Who sent an upload: `api key sha256:...` (the key's fingerprint) or "
        "a console user's name; null for a webhook's file and for uploads sent before "
        "it was recorded."
    )

    @classmethod
    def of(cls, record: FileRecord) -> FileStatusResponse:
        return cls(
            id=record.id,
            source_id=record.resource_id,
            origin=record.origin,
            filename=record.filename,
            url=record.url_redacted,
            status=record.status,
            attempts=record.attempts,
            error=record.error,
            warnings=record.warnings or [],
            rows=record.rows,
            bytes=record.bytes,
            sha256=record.sha256,
            idempotency_key=record.idempotency_key,
            created_at=record.created_at,
            updated_at=record.updated_at,
            finished_at=record.finished_at,
            retracted_at=record.retracted_at,
            retracted_by=record.retracted_by,
            uploaded_by=record.uploaded_by,
        )


class FileListResponse(BaseModel):
    data: list[FileStatusResponse]
    next_after: int | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


class FileAttemptResponse(BaseModel):
    attempt_number: int
    error: str
    ended_at: dt.datetime
    next_attempt_at: dt.datetime | None = Field(
        description="When the next attempt was due; null: the file failed with this one."
    )

    @classmethod
    def of(cls, attempt: FileAttempt) -> FileAttemptResponse:
        return cls(
            attempt_number=attempt.attempt_number,
            error=attempt.error,
            ended_at=attempt.ended_at,
            next_attempt_at=attempt.next_attempt_at,
        )


class FileAttemptListResponse(BaseModel):
    data: list[FileAttemptResponse]
