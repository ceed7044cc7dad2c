"""Status callbacks: outbox event -> one delivery per endpoint -> signed POST attempts.

Three records (STYLE 8): the event (outbox, written with the change it reports), the
delivery (per endpoint, with the stable `webhook-id`), the attempt (per try). The body is
built from the event alone, so every retry sends the same bytes; only the signature's
timestamp changes. 2xx delivers, 410 Gone disables the endpoint, anything else is
retried on the explicit schedule and fails after its last entry. No URL query string and
no secret is ever logged.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from tally.core.clock import as_utc, utc_now
from tally.core.sealing import SealError, SecretBox
from tally.core.status_callbacks import DeliveryStatus
from tally.core.urls import redact_url
from tally.net.callbacks import CallbackResult, post_json
from tally.net.fetch import AddressPolicy, classify_status
from tally.net.signing import sign_payload
from tally.services.file_events import file_event_data
from tally.storage import files, outbox, status_callbacks, webhooks
from tally.storage.engine import write_connection
from tally.storage.outbox import OutboxEvent
from tally.storage.webhooks import EndpointRecord

log = logging.getLogger("tally.callbacks")

FAN_OUT_BATCH = 100
DATA_FIELDS = ("source_id", "file_id", "filename", "status", "rows", "bytes", "sha256", "error")
# Sent only by the events that have them: who took a file back (`file.retracted`).
OWN_FIELDS = ("retracted_by",)
GONE = 410


def message_body(event: OutboxEvent) -> bytes:
    """The JSON body for an event: same event, same bytes (retries re-send it unchanged)."""
    data = {name: event.payload.get(name) for name in DATA_FIELDS}
    data.update({name: event.payload[name] for name in OWN_FIELDS if name in event.payload})
    return orjson.dumps({"type": event.type, "timestamp": _iso_utc(event.created_at), "data": data})


def _iso_utc(at: dt.datetime) -> str:
    return as_utc(at).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _admits(endpoint: EndpointRecord, event_type: str) -> bool:
    return endpoint.events is None or event_type in endpoint.events


def _new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class _Job:
    delivery: status_callbacks.DeliveryRecord
    endpoint: EndpointRecord
    event: OutboxEvent
    disabled: bool


class CallbackSender:
    """The two worker jobs: fan events out into deliveries, send one due delivery
    (`worker` names the holder of the delivery's lease)."""

    def __init__(
        self,
        *,
        engine: Engine,
        box: SecretBox,
        addresses: AddressPolicy,
        retry_schedule_seconds: tuple[float, ...],
        timeout_seconds: float,
        lease_seconds: float,
    ) -> None:
        self._engine = engine
        self._box = box
        self._addresses = addresses
        self._schedule = retry_schedule_seconds
        self._timeout_seconds = timeout_seconds
        self._lease_seconds = lease_seconds

    def fan_out(self) -> bool:
        """Turn pending events into deliveries, marking them processed in one transaction."""
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            events = status_callbacks.claim_pending_events(conn, limit=FAN_OUT_BATCH)
            for event in events:
                if outbox.mark_processed(conn, event.id, now):
                    self._fan_out_event(conn, event, now)
        return bool(events)

    def _fan_out_event(self, conn: Connection, event: OutboxEvent, now: dt.datetime) -> None:
        if not event.payload and event.file_id is not None:  # written before payloads
            status_callbacks.store_event_payload(
                conn, event.id, file_event_data(files.get_file(conn, event.file_id))
            )
        for endpoint in webhooks.list_active_endpoints(conn, event.resource_id):
            if _admits(endpoint, event.type):
                status_callbacks.insert_delivery(
                    conn,
                    event_id=event.id,
                    endpoint_id=endpoint.id,
                    message_id=_new_message_id(),
                    now=now,
                )

    def send_one(self, *, worker: str) -> bool:
        """Claim one due delivery, POST it, record the attempt and what follows from it."""
        job = self._claim(worker)
        if job is None:
            return False
        if job.disabled:  # disabled after this delivery was fanned out
            with write_connection(self._engine) as conn, conn.begin():
                status_callbacks.finish_delivery(
                    conn,
                    job.delivery.id,
                    worker=worker,
                    status=DeliveryStatus.FAILED,
                    now=utc_now(),
                )
            return True
        attempted_at = utc_now()
        result = self._post(job, attempted_at)
        self._record(job, result, attempted_at, worker)
        return True

    def _claim(self, worker: str) -> _Job | None:
        with write_connection(self._engine) as conn, conn.begin():
            delivery = status_callbacks.claim_next_delivery(
                conn, worker=worker, now=utc_now(), lease_seconds=self._lease_seconds
            )
            if delivery is None:
                return None
            return _Job(
                delivery,
                webhooks.get_endpoint(conn, delivery.endpoint_id),
                status_callbacks.get_event(conn, delivery.event_id),
                status_callbacks.endpoint_disabled(conn, delivery.endpoint_id),
            )

    def _post(self, job: _Job, attempted_at: dt.datetime) -> CallbackResult:
        body = message_body(job.event)
        try:
            headers = self._headers(job, attempted_at, body)
        except (SealError, ValueError):
            error = "the endpoint's signing secret cannot be used (not whsec_ + base64?)"
            return CallbackResult(None, "", error, 0)
        return post_json(
            job.endpoint.url,
            body,
            headers,
            policy=self._addresses,
            timeout_seconds=self._timeout_seconds,
        )

    def _headers(self, job: _Job, attempted_at: dt.datetime, body: bytes) -> dict[str, str]:
        message_id = job.delivery.message_id
        if job.endpoint.secret_encrypted is None:
            return {
                "webhook-id": message_id,
                "webhook-timestamp": str(int(attempted_at.timestamp())),
            }
        secret = self._box.open(job.endpoint.secret_encrypted)
        return sign_payload(secret, message_id, attempted_at, body)

    def _next_attempt_at(self, attempt_number: int, now: dt.datetime) -> dt.datetime | None:
        if attempt_number > len(self._schedule):
            return None
        return now + dt.timedelta(seconds=self._schedule[attempt_number - 1])

    def _record(
        self, job: _Job, result: CallbackResult, attempted_at: dt.datetime, worker: str
    ) -> None:
        delivery, now = job.delivery, utc_now()
        gone = result.status_code == GONE
        retry_at = (
            None if result.is_success or gone else self._next_attempt_at(delivery.attempts, now)
        )
        with write_connection(self._engine) as conn, conn.begin():
            status_callbacks.record_attempt(
                conn,
                delivery_id=delivery.id,
                attempt_number=delivery.attempts,
                url=redact_url(job.endpoint.url),
                status_code=result.status_code,
                response_excerpt=result.excerpt or None,
                error=_attempt_error(result, job),
                duration_ms=result.duration_ms,
                attempted_at=attempted_at,
                next_attempt_at=retry_at,
            )
            if gone:
                webhooks.disable_endpoint(conn, job.endpoint.id, now)
                status_callbacks.fail_pending_for_endpoint(conn, job.endpoint.id, now)
            elif retry_at is not None:
                status_callbacks.schedule_retry(
                    conn, delivery.id, worker=worker, next_attempt_at=retry_at
                )
            else:
                status = DeliveryStatus.DELIVERED if result.is_success else DeliveryStatus.FAILED
                status_callbacks.finish_delivery(
                    conn, delivery.id, worker=worker, status=status, now=now
                )
        log.info("callback_attempted", extra=_log_extra(job, result, retry_at, gone))


def _attempt_error(result: CallbackResult, job: _Job) -> str | None:
    if result.error is not None or result.status_code is None or result.is_success:
        return result.error
    message = classify_status(result.status_code, None, source=redact_url(job.endpoint.url)).message
    if 300 <= result.status_code < 400:
        message += " (redirects are not followed)"
    elif result.status_code == GONE:
        message += " (the endpoint is disabled)"
    return message


def _log_extra(
    job: _Job, result: CallbackResult, retry_at: dt.datetime | None, gone: bool
) -> dict[str, Any]:
    return {
        "delivery_id": job.delivery.id,
        "endpoint_id": job.endpoint.id,
        "event_id": job.event.id,
        "attempt": job.delivery.attempts,
        "status_code": result.status_code,
        "delivered": result.is_success,
        "endpoint_disabled": gone,
        "retry_at": retry_at.isoformat() if retry_at else None,
    }
