"""The outbox: facts written in the transaction of the change they record, consumed later
(derived runs queued, status callbacks), so no event is lost or sent for a rolled-back
change."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from tally.core.clock import as_utc
from tally.storage.schema import notification_attempts, notification_deliveries, outbox_events

# An input's rows changed (a file delivered, rows appended, an output republished): every
# derived resource reading it runs again.
INPUT_CHANGED = "input_changed"
# INPUT_CHANGED as written before revision 0008 (which renames the pending ones): read too,
# as a process of the previous version may still write it during an upgrade.
INPUT_CHANGED_BEFORE_0008 = "reconciliation"
STATUS_CALLBACK = "status_callback"
# STATUS_CALLBACK as written before revision 0009 (which renames the pending ones): read
# too, as a process of the previous version may still write it during an upgrade.
STATUS_CALLBACK_BEFORE_0009 = "notification"


@dataclass(frozen=True)
class OutboxEvent:
    id: int
    topic: str
    type: str
    resource_id: int
    file_id: int | None
    payload: dict[str, Any]
    created_at: dt.datetime


_INSERT_EVENT = insert(outbox_events).returning(outbox_events.c.id)  # built once: hot path
_INSERT_EVENTS = insert(outbox_events)


def add_event(
    conn: Connection,
    *,
    topic: str,
    type: str,
    resource_id: int,
    file_id: int | None,
    payload: dict[str, Any],
    now: dt.datetime,
) -> int:
    values = dict(
        topic=topic,
        type=type,
        resource_id=resource_id,
        file_id=file_id,
        payload=payload,
        created_at=now,
    )
    return int(conn.execute(_INSERT_EVENT, values).scalar_one())


def _event(row: Any) -> OutboxEvent:
    """An event as read; its time in UTC (SQLite returns it naive)."""
    return OutboxEvent(
        row.id,
        row.topic,
        row.type,
        row.resource_id,
        row.file_id,
        row.payload,
        as_utc(row.created_at),
    )


def list_pending(conn: Connection, *topics: str, limit: int) -> list[OutboxEvent]:
    """The oldest events of these topics not processed yet, at most `limit`."""
    rows = conn.execute(
        select(outbox_events)
        .where(outbox_events.c.topic.in_(topics), outbox_events.c.processed_at.is_(None))
        .order_by(outbox_events.c.id)
        .limit(limit)
    )
    return [_event(r) for r in rows]


def list_events(conn: Connection, topic: str, resource_id: int) -> list[OutboxEvent]:
    rows = conn.execute(
        select(outbox_events)
        .where(outbox_events.c.topic == topic, outbox_events.c.resource_id == resource_id)
        .order_by(outbox_events.c.id)
    )
    return [_event(r) for r in rows]


def mark_processed(conn: Connection, event_id: int, now: dt.datetime) -> bool:
    result = conn.execute(
        update(outbox_events)
        .where(outbox_events.c.id == event_id, outbox_events.c.processed_at.is_(None))
        .values(processed_at=now)
    )
    return result.rowcount == 1


def add_events(conn: Connection, events: Sequence[dict[str, Any]]) -> None:
    """Record many events (the columns of `add_event`) in one statement."""
    if events:
        conn.execute(_INSERT_EVENTS, list(events))


def delete_events_of(conn: Connection, resource_id: int) -> None:
    """Every event about a resource being deleted, with its deliveries and their attempts."""
    events = select(outbox_events.c.id).where(outbox_events.c.resource_id == resource_id)
    deliveries = select(notification_deliveries.c.id).where(
        notification_deliveries.c.event_id.in_(events)
    )
    conn.execute(
        delete(notification_attempts).where(notification_attempts.c.delivery_id.in_(deliveries))
    )
    conn.execute(
        delete(notification_deliveries).where(notification_deliveries.c.event_id.in_(events))
    )
    conn.execute(delete(outbox_events).where(outbox_events.c.resource_id == resource_id))
