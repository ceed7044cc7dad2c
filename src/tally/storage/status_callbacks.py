"""Queries for status-callback deliveries (one per event and endpoint) and attempts.

A delivery is its own job, claimed with a lease like a file (storage/leases.py): FOR
UPDATE SKIP LOCKED on PostgreSQL, the single writer (BEGIN IMMEDIATE) on SQLite.
Outcomes are written only by the lease holder, so a lost lease never overwrites.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, insert, select, update

from tally.core.status_callbacks import DeliveryStatus
from tally.storage.engine import backend_of
from tally.storage.leases import Leases
from tally.storage.outbox import STATUS_CALLBACK, STATUS_CALLBACK_BEFORE_0009, OutboxEvent
from tally.storage.schema import (
    notification_attempts,
    notification_deliveries,
    notification_endpoints,
    outbox_events,
)

_LEASES = Leases(notification_deliveries)


@dataclass(frozen=True)
class DeliveryRecord:
    id: int
    event_id: int
    endpoint_id: int
    message_id: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: dt.datetime
    lease_owner: str | None
    created_at: dt.datetime
    finished_at: dt.datetime | None

    @classmethod
    def from_row(cls, row: Any) -> DeliveryRecord:
        values = {name: getattr(row, name) for name in cls.__dataclass_fields__}
        return cls(**{**values, "status": DeliveryStatus(values["status"])})


@dataclass(frozen=True)
class AttemptRecord:
    id: int
    delivery_id: int
    attempt_number: int
    url: str
    status_code: int | None
    response_excerpt: str | None
    error: str | None
    duration_ms: int
    attempted_at: dt.datetime
    next_attempt_at: dt.datetime | None

    @classmethod
    def from_row(cls, row: Any) -> AttemptRecord:
        return cls(**{name: getattr(row, name) for name in cls.__dataclass_fields__})


def _event(row: Any) -> OutboxEvent:
    return OutboxEvent(
        row.id, row.topic, row.type, row.resource_id, row.file_id, row.payload, row.created_at
    )


def claim_pending_events(conn: Connection, *, limit: int) -> list[OutboxEvent]:
    """The oldest unprocessed status-callback events (either topic name: see
    STATUS_CALLBACK_BEFORE_0009), locked against other fan-outs."""
    stmt = (
        select(outbox_events)
        .where(
            outbox_events.c.topic.in_((STATUS_CALLBACK, STATUS_CALLBACK_BEFORE_0009)),
            outbox_events.c.processed_at.is_(None),
        )
        .order_by(outbox_events.c.id)
        .limit(limit)
    )
    if backend_of(conn).supports_skip_locked:
        stmt = stmt.with_for_update(skip_locked=True)
    return [_event(row) for row in conn.execute(stmt)]


def get_event(conn: Connection, event_id: int) -> OutboxEvent:
    return _event(conn.execute(select(outbox_events).where(outbox_events.c.id == event_id)).one())


def store_event_payload(conn: Connection, event_id: int, payload: dict[str, Any]) -> None:
    """Fill in the payload of an event written without one (before payloads existed)."""
    conn.execute(
        update(outbox_events).where(outbox_events.c.id == event_id).values(payload=payload)
    )


def insert_delivery(
    conn: Connection, *, event_id: int, endpoint_id: int, message_id: str, now: dt.datetime
) -> int:
    return int(
        conn.execute(
            insert(notification_deliveries)
            .values(
                event_id=event_id,
                endpoint_id=endpoint_id,
                message_id=message_id,
                status=DeliveryStatus.PENDING,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
            )
            .returning(notification_deliveries.c.id)
        ).scalar_one()
    )


def claim_next_delivery(
    conn: Connection, *, worker: str, now: dt.datetime, lease_seconds: float
) -> DeliveryRecord | None:
    """Lease the oldest due delivery whose lease is free or expired; count the attempt."""
    d = notification_deliveries.c
    row = _LEASES.claim(
        conn,
        eligible=and_(d.status == DeliveryStatus.PENDING, d.next_attempt_at <= now),
        order_by=(d.next_attempt_at, d.id),
        worker=worker,
        now=now,
        lease_seconds=lease_seconds,
    )
    return DeliveryRecord.from_row(row) if row else None


def endpoint_disabled(conn: Connection, endpoint_id: int) -> bool:
    return (
        conn.execute(
            select(notification_endpoints.c.disabled_at).where(
                notification_endpoints.c.id == endpoint_id
            )
        ).scalar()
        is not None
    )


def record_attempt(
    conn: Connection,
    *,
    delivery_id: int,
    attempt_number: int,
    url: str,
    status_code: int | None,
    response_excerpt: str | None,
    error: str | None,
    duration_ms: int,
    attempted_at: dt.datetime,
    next_attempt_at: dt.datetime | None,
) -> None:
    conn.execute(
        insert(notification_attempts).values(
            delivery_id=delivery_id,
            attempt_number=attempt_number,
            url=url,
            status_code=status_code,
            response_excerpt=response_excerpt,
            error=error,
            duration_ms=duration_ms,
            attempted_at=attempted_at,
            next_attempt_at=next_attempt_at,
        )
    )


def _held(delivery_id: int, worker: str) -> Any:
    d = notification_deliveries.c
    return and_(d.id == delivery_id, d.lease_owner == worker, d.status == DeliveryStatus.PENDING)


def finish_delivery(
    conn: Connection, delivery_id: int, *, worker: str, status: DeliveryStatus, now: dt.datetime
) -> bool:
    """Delivered or failed for good; False if `worker` no longer holds the delivery."""
    result = conn.execute(
        update(notification_deliveries)
        .where(_held(delivery_id, worker))
        .values(status=status, finished_at=now, lease_owner=None, lease_expires_at=None)
    )
    return result.rowcount == 1


def schedule_retry(
    conn: Connection, delivery_id: int, *, worker: str, next_attempt_at: dt.datetime
) -> bool:
    result = conn.execute(
        update(notification_deliveries)
        .where(_held(delivery_id, worker))
        .values(next_attempt_at=next_attempt_at, lease_owner=None, lease_expires_at=None)
    )
    return result.rowcount == 1


def fail_pending_for_endpoint(conn: Connection, endpoint_id: int, now: dt.datetime) -> int:
    """Stop every pending delivery to an endpoint (it answered 410 Gone)."""
    d = notification_deliveries.c
    result = conn.execute(
        update(notification_deliveries)
        .where(d.endpoint_id == endpoint_id, d.status == DeliveryStatus.PENDING)
        .values(
            status=DeliveryStatus.FAILED, finished_at=now, lease_owner=None, lease_expires_at=None
        )
    )
    return int(result.rowcount)


def list_deliveries_for_file(conn: Connection, file_id: int) -> list[DeliveryRecord]:
    rows = conn.execute(
        select(notification_deliveries)
        .join(outbox_events, outbox_events.c.id == notification_deliveries.c.event_id)
        .where(outbox_events.c.file_id == file_id)
        .order_by(notification_deliveries.c.id)
    )
    return [DeliveryRecord.from_row(row) for row in rows]


def list_attempts_for_file(conn: Connection, file_id: int) -> list[AttemptRecord]:
    """Every status-callback attempt about a file, by delivery then attempt."""
    rows = conn.execute(
        select(notification_attempts)
        .join(
            notification_deliveries,
            notification_deliveries.c.id == notification_attempts.c.delivery_id,
        )
        .join(outbox_events, outbox_events.c.id == notification_deliveries.c.event_id)
        .where(outbox_events.c.file_id == file_id)
        .order_by(
            notification_attempts.c.delivery_id,
            notification_attempts.c.attempt_number,
            notification_attempts.c.id,
        )
    )
    return [AttemptRecord.from_row(row) for row in rows]
