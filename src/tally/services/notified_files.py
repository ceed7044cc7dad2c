"""What a webhook notification queues: the file row read from its payload, refused
(a 4xx error) before anything is written, and the reply the webhook is configured with.

Used by services/notification_intake.py, which accepts notifications in groups."""

from __future__ import annotations

import datetime as dt
import hmac
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection

from tally.core.errors import IdempotencyKeyReusedError, InvalidNotificationError
from tally.core.files import FileRecord
from tally.core.json_paths import lookup
from tally.core.names import FILENAME_MAX_CHARS, filename_problem, http_url_problem
from tally.core.sealing import SecretBox
from tally.core.urls import redact_url
from tally.services import file_events
from tally.storage import files, notified_groups
from tally.storage.webhooks import WebhookRecord

WEBHOOK_ORIGIN = "webhook"


@dataclass(frozen=True)
class AcceptedNotification:
    file_id: int
    created: bool  # False: an Idempotency-Key seen before; nothing new was queued
    status_code: int
    content_type: str
    body: Any


def _file_url(payload: Any, path: str) -> str:
    """The notification's file URL, refused (400 naming the field) unless a download
    could start from it: http(s), a host, a valid port, no spaces or control characters
    (which `urlsplit` would quietly strip), and no user:password (credentials belong in
    the source's configuration, encrypted, not in URLs that get logged)."""
    value = lookup(payload, path)
    if not isinstance(value, str) or not value.strip():
        raise InvalidNotificationError(f"no file URL at '{path}' in the notification", field=path)
    problem = http_url_problem(value)
    if problem is not None:
        raise InvalidNotificationError(f"the value at '{path}' {problem}", field=path)
    return value


def _filename(payload: Any, path: str, url: str) -> str:
    """The file name the notification gives, else the URL's last path segment (cut to
    the longest name kept)."""
    value = lookup(payload, path)
    if isinstance(value, str) and value:
        if (problem := filename_problem(value)) is not None:
            raise InvalidNotificationError(f"the file name at '{path}' {problem}", field=path)
        return value
    return urlsplit(url).path.rsplit("/", 1)[-1][:FILENAME_MAX_CHARS] or "file"


def notified_file(
    box: SecretBox,
    webhook: WebhookRecord,
    payload: Any,
    *,
    idempotency_key: str | None,
    deadline_seconds: float,
    now: dt.datetime,
) -> dict[str, Any]:
    """The file row a notification queues; raises the 4xx error of a bad notification
    before anything is written."""
    if not isinstance(payload, dict):
        raise InvalidNotificationError("the notification must be a JSON object")
    url = _file_url(payload, webhook.url_field)
    return files.new_file_values(
        resource_id=webhook.resource_id,
        webhook_id=webhook.id,
        origin=WEBHOOK_ORIGIN,
        url_encrypted=box.seal(url),
        url_redacted=redact_url(url),
        filename=_filename(payload, webhook.filename_field, url),
        idempotency_key=idempotency_key,
        blob_path=None,
        sha256=None,
        size=None,
        now=now,
        give_up_at=now + dt.timedelta(seconds=deadline_seconds),
    )


def accept_in_transaction(
    conn: Connection,
    box: SecretBox,
    webhook: WebhookRecord,
    *,
    payload: Any,
    idempotency_key: str | None,
    deadline_seconds: float,
    now: dt.datetime,
) -> AcceptedNotification:
    """One notified file row and its `file.accepted` event, in the caller's transaction
    (the intake's one-at-a-time path, for a file with an Idempotency-Key)."""
    row = notified_file(
        box,
        webhook,
        payload,
        idempotency_key=idempotency_key,
        deadline_seconds=deadline_seconds,
        now=now,
    )
    record, created = files.insert_file(conn, row)
    if created:  # the record is the row just inserted: no need to read it again
        file_events.record_event(
            conn,
            event=file_events.ACCEPTED,
            resource_id=webhook.resource_id,
            current=record,
            now=now,
        )
    else:
        check_same_notification(box, record, row)
    return accepted_reply(webhook, record, created)


def check_same_notification(box: SecretBox, earlier: FileRecord, row: dict[str, Any]) -> None:
    """A retry names the file its key first queued: the same URL and file name (what the
    notification queues; other payload fields, a send time, may differ between
    retries). Else IdempotencyKeyReusedError: the new file is refused, never dropped
    silently. The URLs are compared as the sealed values open, in constant time (they
    may carry a signature); nothing more of them is stored."""
    key = earlier.idempotency_key or ""
    if earlier.origin != WEBHOOK_ORIGIN or earlier.url_encrypted is None:
        raise IdempotencyKeyReusedError(key, f"it queued file {earlier.id} by an upload")
    first = box.open(earlier.url_encrypted).encode()
    if not hmac.compare_digest(first, box.open(row["url_encrypted"]).encode()):
        raise IdempotencyKeyReusedError(key, f"it queued file {earlier.id} from another URL")
    if earlier.filename != row["filename"]:
        raise IdempotencyKeyReusedError(
            key, f"it queued file {earlier.id} named {earlier.filename!r}"
        )


def queue_notified_files(
    conn: Connection, rows: list[dict[str, Any]], now: dt.datetime
) -> list[FileRecord]:
    """Many notified files (rows from `notified_file`, without idempotency keys) and
    their `file.accepted` events, two statements for all of them."""
    records = files.insert_files(conn, rows)
    file_events.record_events(conn, event=file_events.ACCEPTED, records=records, now=now)
    return records


def queue_notified_files_at_once(
    conn: Connection, rows: list[dict[str, Any]], now: dt.datetime
) -> list[FileRecord]:
    """PostgreSQL: notified files whose rows carry their reserved ids and their
    `file.accepted` events, in one statement that is its own transaction (decision
    0021)."""
    records = [FileRecord.from_values(row) for row in rows]
    notified_groups.queue(conn, rows, file_events.event_rows(file_events.ACCEPTED, records, now))
    return records


def accepted_reply(
    webhook: WebhookRecord, record: FileRecord, created: bool
) -> AcceptedNotification:
    return AcceptedNotification(
        record.id,
        created,
        webhook.response_status,
        webhook.response_content_type,
        webhook.response_body,
    )
