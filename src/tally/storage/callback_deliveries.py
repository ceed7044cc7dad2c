"""A source's status-callback deliveries as people see them: newest first, each with its
last attempt and its endpoint's state; and a delivery made due again ("Retry now")."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, Select, and_, func, or_, select, update

from tally.core.clock import as_utc
from tally.core.status_callbacks import DeliveryState, DeliveryStatus, DeliveryView
from tally.core.urls import redact_url
from tally.storage.schema import (
    MAX_ID,
    notification_attempts,
    notification_deliveries,
    notification_endpoints,
    outbox_events,
)

_d, _e, _n, _a = (
    notification_deliveries.c,
    outbox_events.c,
    notification_endpoints.c,
    notification_attempts.c,
)


def _of_source(resource_id: int) -> Select[Any]:
    last_attempt = (
        select(func.max(_a.id)).where(_a.delivery_id == _d.id).correlate(notification_deliveries)
    ).scalar_subquery()
    return (
        select(
            notification_deliveries,
            _e.type.label("event"),
            _e.file_id,
            _n.url,
            _n.disabled_at,
            notification_attempts.c.status_code.label("last_status_code"),
            notification_attempts.c.error.label("last_error"),
            notification_attempts.c.attempted_at.label("last_attempted_at"),
        )
        .join(outbox_events, _e.id == _d.event_id)
        .join(notification_endpoints, _n.id == _d.endpoint_id)
        .outerjoin(notification_attempts, _a.id == last_attempt)
        .where(_e.resource_id == resource_id)
    )


def _view(row: Any) -> DeliveryView:
    status = DeliveryStatus(row.status)
    state = DeliveryState(status.value)
    if row.disabled_at is not None and status is not DeliveryStatus.DELIVERED:
        state = DeliveryState.DISABLED
    return DeliveryView(
        id=row.id,
        event=row.event,
        file_id=row.file_id,
        url=redact_url(row.url),
        state=state,
        attempts=row.attempts,
        next_attempt_at=as_utc(row.next_attempt_at) if state is DeliveryState.PENDING else None,
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        last_attempted_at=as_utc(row.last_attempted_at) if row.last_attempted_at else None,
        created_at=as_utc(row.created_at),
        finished_at=as_utc(row.finished_at) if row.finished_at else None,
    )


def list_source_deliveries(
    conn: Connection,
    resource_id: int,
    *,
    limit: int,
    before_id: int | None = None,
    file_id: int | None = None,
) -> list[DeliveryView]:
    """Newest first (by event, then delivery: the source's events by their index, so a
    page reads a page of rows however many deliveries there are), after the delivery
    `before_id` in that order (None: from the newest), about `file_id` when given."""
    query = _of_source(resource_id)
    if file_id is not None:
        query = query.where(_e.file_id == file_id)
    if before_id is not None:
        before_id = min(before_id, MAX_ID)
        event_of = select(_d.event_id).where(_d.id == before_id).scalar_subquery()
        query = query.where(_e.id <= event_of, or_(_e.id < event_of, _d.id < before_id))
    newest_first = query.order_by(_e.id.desc(), _d.id.desc()).limit(limit)
    return [_view(row) for row in conn.execute(newest_first)]


def find_source_delivery(
    conn: Connection, resource_id: int, delivery_id: int
) -> DeliveryView | None:
    row = conn.execute(_of_source(resource_id).where(_d.id == delivery_id)).first()
    return _view(row) if row is not None else None


def make_due(conn: Connection, delivery_id: int, now: dt.datetime) -> bool:
    """A pending or failed delivery due now, pending again (a worker sends it next);
    False while a worker's live lease holds it (it is being sent)."""
    free = or_(_d.lease_owner.is_(None), _d.lease_expires_at < now)
    result = conn.execute(
        update(notification_deliveries)
        .where(
            and_(
                _d.id == delivery_id,
                _d.status.in_((DeliveryStatus.PENDING, DeliveryStatus.FAILED)),
                free,
            )
        )
        .values(
            status=DeliveryStatus.PENDING,
            next_attempt_at=now,
            finished_at=None,
            lease_owner=None,
            lease_expires_at=None,
        )
    )
    return result.rowcount == 1
