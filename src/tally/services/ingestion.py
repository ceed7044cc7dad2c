"""The ingestion API's use cases: who may call it, webhook registration, notifications.

A notification is committed (file queued, `file.accepted` in the outbox) before the
caller gets its reply; the download happens later, in a worker.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.errors import (
    FileNotFoundInSourceError,
    IngestionForbiddenError,
    InvalidNotificationError,
    ResourceNotFoundError,
    WebhookNotFoundError,
)
from tally.core.ids import hash_secret, new_webhook_id, secret_matches
from tally.core.json_paths import lookup
from tally.core.names import FILENAME_MAX_CHARS, filename_problem, http_url_problem
from tally.core.sealing import SecretBox
from tally.services import catalogue
from tally.storage import accounts, files, outbox, resources, webhooks
from tally.storage.accounts import Workspace
from tally.storage.engine import write_connection
from tally.storage.resources import Resource
from tally.storage.schema import is_storable_id


def authenticate(
    engine: Engine, *, api_key: str | None, workspace: str | None, account: str | None
) -> Workspace:
    """All three headers together, or the same 403 whatever was wrong (spec part 5)."""
    try:
        workspace_id, account_id = int(workspace or ""), int(account or "")
    except ValueError:
        raise IngestionForbiddenError() from None
    if not api_key:
        raise IngestionForbiddenError()
    with engine.connect() as conn:
        stored = accounts.find_active_key(conn, hash_secret(api_key))
        found = accounts.find_workspace(conn, workspace_id)
    if (
        stored is None
        or not secret_matches(api_key, stored.key_hash)
        or found is None
        or stored.workspace_id != workspace_id
        or not found.ingestion_enabled
        or found.account_id != account_id
    ):
        raise IngestionForbiddenError()
    return found


@dataclass(frozen=True)
class NotificationConfig:
    url: str
    secret: str | None = None
    events: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WebhookDefinition:
    name: str
    folder_id: int | None = None
    url_field: str = "file_url"
    filename_field: str = "filename"
    credentials: dict[str, str] | None = None  # {"type": ..., fields...}
    response_status: int = 200
    response_content_type: str = "application/json"
    response_body: Any = field(default_factory=lambda: {"status": "accepted"})
    notification: NotificationConfig | None = None


@dataclass(frozen=True)
class RegisteredWebhook:
    source: Resource
    webhook_id: str  # shown once; only its hash is stored


def add_notification_endpoint(
    conn: Connection,
    box: SecretBox,
    resource_id: int,
    config: NotificationConfig | None,
    now: dt.datetime,
) -> None:
    if config is None:
        return
    webhooks.insert_endpoint(
        conn,
        resource_id=resource_id,
        url=config.url,
        secret_encrypted=box.seal(config.secret) if config.secret else None,
        events=list(config.events) if config.events is not None else None,
        now=now,
    )


def register_webhook(
    engine: Engine, box: SecretBox, *, workspace_id: int, definition: WebhookDefinition
) -> RegisteredWebhook:
    """The source and its webhook, in one transaction."""
    webhook_id = new_webhook_id()
    now = utc_now()
    with write_connection(engine) as conn, conn.begin():
        source = catalogue.create_source_in(
            conn, workspace_id=workspace_id, name=definition.name, folder_id=definition.folder_id
        )
        credentials = (
            box.seal(orjson.dumps(definition.credentials).decode())
            if definition.credentials
            else None
        )
        webhooks.insert_webhook(
            conn,
            resource_id=source.id,
            workspace_id=workspace_id,
            webhook_id_hash=hash_secret(webhook_id),
            url_field=definition.url_field,
            filename_field=definition.filename_field,
            credentials_encrypted=credentials,
            response_status=definition.response_status,
            response_content_type=definition.response_content_type,
            response_body=definition.response_body,
            now=now,
        )
        add_notification_endpoint(conn, box, source.id, definition.notification, now)
    return RegisteredWebhook(source, webhook_id)


@dataclass(frozen=True)
class AcceptedNotification:
    file_id: int
    created: bool  # False: an Idempotency-Key seen before; nothing new was queued
    status_code: int
    content_type: str
    body: Any


def redact_url(url: str) -> str:
    """Scheme, host and path only: pre-signed URLs carry secrets in the query. Only
    for URLs `_file_url` accepted (their port is a valid number)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


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


def file_event_data(file: files.FileRecord) -> dict[str, Any]:
    """The `data` of a status notification: the file as it is at the event."""
    return {
        "source_id": file.resource_id,
        "file_id": file.id,
        "filename": file.filename,
        "status": file.status,
        "rows": file.rows,
        "bytes": file.bytes,
        "sha256": file.sha256,
        "error": file.error,
    }


def queue_event(
    conn: Connection, *, event: str, resource_id: int, file: files.FileRecord, now: dt.datetime
) -> None:
    """Record a file event for status notifications (fanned out by the workers).

    The payload snapshots the file as this transaction sees it (callers pass the record
    they claimed, from before their own update), so every retry sends the same body."""
    record_event(
        conn, event=event, resource_id=resource_id, current=files.get_file(conn, file.id), now=now
    )


def record_event(
    conn: Connection, *, event: str, resource_id: int, current: files.FileRecord, now: dt.datetime
) -> None:
    """`queue_event` for a caller whose record is the file as this transaction sees it."""
    outbox.add_events(conn, [_event_row(event, resource_id, current, now)])


def _event_row(
    event: str, resource_id: int, current: files.FileRecord, now: dt.datetime
) -> dict[str, Any]:
    return dict(
        topic=outbox.NOTIFICATION,
        type=event,
        resource_id=resource_id,
        file_id=current.id,
        payload=file_event_data(current),
        created_at=now,
    )


def find_webhook(engine: Engine, webhook_id: str) -> webhooks.WebhookRecord:
    with engine.connect() as conn:
        webhook = webhooks.find_webhook_by_hash(conn, hash_secret(webhook_id))
    if webhook is None:
        raise WebhookNotFoundError()
    return webhook


def accept_in_transaction(
    conn: Connection,
    box: SecretBox,
    webhook: webhooks.WebhookRecord,
    *,
    payload: Any,
    idempotency_key: str | None,
    deadline_seconds: float,
    now: dt.datetime,
) -> AcceptedNotification:
    """One notified file row and its `file.accepted` event, in the caller's transaction
    (services/intake.py accepts notifications in groups; this is its one-at-a-time path,
    for a file with an Idempotency-Key)."""
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
        record_event(
            conn, event="file.accepted", resource_id=webhook.resource_id, current=record, now=now
        )
    return accepted_reply(webhook, record, created)


def notified_file(
    box: SecretBox,
    webhook: webhooks.WebhookRecord,
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
        origin="webhook",
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


def queue_notified_files(
    conn: Connection, rows: list[dict[str, Any]], now: dt.datetime
) -> list[files.FileRecord]:
    """Many notified files (rows from `notified_file`, without idempotency keys) and
    their `file.accepted` events, two statements for all of them."""
    records = files.insert_files(conn, rows)
    outbox.add_events(conn, [_event_row("file.accepted", r.resource_id, r, now) for r in records])
    return records


def accepted_reply(
    webhook: webhooks.WebhookRecord, record: files.FileRecord, created: bool
) -> AcceptedNotification:
    return AcceptedNotification(
        record.id,
        created,
        webhook.response_status,
        webhook.response_content_type,
        webhook.response_body,
    )


def get_owned_source(conn: Connection, workspace_id: int, source_id: int) -> Resource:
    """The source, if this workspace owns it; otherwise it does not exist (404)."""
    resource = resources.find_resource(conn, source_id)
    if resource is None or resource.workspace_id != workspace_id or resource.kind != "source":
        raise ResourceNotFoundError()
    return resource


def list_source_files(
    engine: Engine, *, workspace_id: int, source_id: int, after_id: int, limit: int
) -> list[files.FileRecord]:
    with engine.connect() as conn:
        get_owned_source(conn, workspace_id, source_id)
        return files.list_files(conn, source_id, limit=limit, after_id=after_id)


def get_source_file(
    engine: Engine, *, workspace_id: int, source_id: int, file_id: int
) -> files.FileRecord:
    with engine.connect() as conn:
        get_owned_source(conn, workspace_id, source_id)
        record = files.get_file(conn, file_id) if is_storable_id(file_id) else None
    if record is None or record.resource_id != source_id:
        raise FileNotFoundInSourceError()
    return record
