"""Queries for webhooks (by the hash of their id) and status-callback endpoints (table
`notification_endpoints`: docs/glossary.md)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select, update

from tally.storage.schema import notification_endpoints, webhooks


@dataclass(frozen=True)
class WebhookRecord:
    id: int
    resource_id: int
    workspace_id: int
    url_field: str
    filename_field: str
    credentials_encrypted: str | None
    response_status: int
    response_content_type: str
    response_body: Any


@dataclass(frozen=True)
class EndpointRecord:
    id: int
    resource_id: int
    url: str
    secret_encrypted: str | None
    events: tuple[str, ...] | None


def insert_webhook(
    conn: Connection,
    *,
    resource_id: int,
    workspace_id: int,
    webhook_id_hash: str,
    url_field: str,
    filename_field: str,
    credentials_encrypted: str | None,
    response_status: int,
    response_content_type: str,
    response_body: Any,
    now: dt.datetime,
) -> int:
    return int(
        conn.execute(
            insert(webhooks)
            .values(
                resource_id=resource_id,
                workspace_id=workspace_id,
                webhook_id_hash=webhook_id_hash,
                url_field=url_field,
                filename_field=filename_field,
                credentials_encrypted=credentials_encrypted,
                response_status=response_status,
                response_content_type=response_content_type,
                response_body=response_body,
                created_at=now,
            )
            .returning(webhooks.c.id)
        ).scalar_one()
    )


def webhook_record(row: Any) -> WebhookRecord:
    """A webhook from a row of the table (any query selecting all its columns)."""
    return WebhookRecord(
        row.id,
        row.resource_id,
        row.workspace_id,
        row.url_field,
        row.filename_field,
        row.credentials_encrypted,
        row.response_status,
        row.response_content_type,
        row.response_body,
    )


def find_webhook_by_hash(conn: Connection, webhook_id_hash: str) -> WebhookRecord | None:
    row = conn.execute(
        select(webhooks).where(webhooks.c.webhook_id_hash == webhook_id_hash)
    ).first()
    return webhook_record(row) if row is not None else None


def find_webhook_of_source(conn: Connection, resource_id: int) -> WebhookRecord | None:
    """The webhook feeding a source (POST /api/v2/webhooks makes one per source)."""
    row = conn.execute(
        select(webhooks).where(webhooks.c.resource_id == resource_id).order_by(webhooks.c.id)
    ).first()
    return webhook_record(row) if row is not None else None


def set_webhook_id_hash(conn: Connection, webhook_row_id: int, webhook_id_hash: str) -> None:
    """A new webhook id (its hash): the old one names nothing from the commit on."""
    conn.execute(
        update(webhooks)
        .where(webhooks.c.id == webhook_row_id)
        .values(webhook_id_hash=webhook_id_hash)
    )


def get_webhook(conn: Connection, webhook_row_id: int) -> WebhookRecord:
    return webhook_record(
        conn.execute(select(webhooks).where(webhooks.c.id == webhook_row_id)).one()
    )


def insert_endpoint(
    conn: Connection,
    *,
    resource_id: int,
    url: str,
    secret_encrypted: str | None,
    events: list[str] | None,
    now: dt.datetime,
) -> int:
    return int(
        conn.execute(
            insert(notification_endpoints)
            .values(
                resource_id=resource_id,
                url=url,
                secret_encrypted=secret_encrypted,
                events=events,
                created_at=now,
            )
            .returning(notification_endpoints.c.id)
        ).scalar_one()
    )


def _endpoint(row: Any) -> EndpointRecord:
    return EndpointRecord(
        row.id,
        row.resource_id,
        row.url,
        row.secret_encrypted,
        tuple(row.events) if row.events is not None else None,
    )


def list_active_endpoints(conn: Connection, resource_id: int) -> list[EndpointRecord]:
    rows = conn.execute(
        select(notification_endpoints).where(
            notification_endpoints.c.resource_id == resource_id,
            notification_endpoints.c.disabled_at.is_(None),
        )
    )
    return [_endpoint(row) for row in rows]


def get_endpoint(conn: Connection, endpoint_id: int) -> EndpointRecord:
    return _endpoint(
        conn.execute(
            select(notification_endpoints).where(notification_endpoints.c.id == endpoint_id)
        ).one()
    )


def disable_endpoint(conn: Connection, endpoint_id: int, now: dt.datetime) -> None:
    conn.execute(
        update(notification_endpoints)
        .where(notification_endpoints.c.id == endpoint_id)
        .values(disabled_at=now)
    )
