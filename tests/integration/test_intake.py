"""Notifications accepted in groups (services/notification_intake.py), on SQLite and PostgreSQL.

The intake is held behind the database's write lock while notifications pile up, so
they are accepted in groups of many: good ones together (one multi-row INSERT for the files,
one for their events; on PostgreSQL a group without keys is two statements, decision 0021),
a keyed one on its own, and each bad one failing alone. Every caller must get its own
answer and every file its own event.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import IntegrityError

from support.databases import BACKENDS
from support.factories import make_tenant
from tally.core.clock import utc_now
from tally.core.errors import (
    IdempotencyKeyReusedError,
    InvalidNotificationError,
    WebhookNotFoundError,
)
from tally.core.files import FileRecord
from tally.core.ids import hash_secret
from tally.core.sealing import SecretBox
from tally.runtime import Runtime
from tally.runtime.policies import secret_box
from tally.services import file_events
from tally.services.notification_intake import Notification, NotificationIntake
from tally.services.notified_files import (
    AcceptedNotification,
    notified_file,
    queue_notified_files_at_once,
)
from tally.services.webhooks import WebhookDefinition
from tally.storage import notified_groups, outbox
from tally.storage.engine import autocommit_connection, backend_of, write_connection
from tally.storage.files import get_file
from tally.storage.schema import files, outbox_events

# The two-statement group is PostgreSQL's (decision 0021); SQLite's is the transaction
# the other tests check on both backends.
ON_POSTGRESQL = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "postgresql"])


@contextlib.contextmanager
def write_lock_held(engine: Engine) -> Iterator[None]:
    """Keep every writer of `files` waiting until the block ends."""
    with write_connection(engine) as conn, conn.begin():
        if backend_of(conn).is_postgresql:
            conn.exec_driver_sql("LOCK TABLE files IN SHARE ROW EXCLUSIVE MODE")
        yield


def register(runtime: Runtime) -> str:
    tenant = make_tenant(runtime.engine, ingestion=True)
    definition = WebhookDefinition(name=f"drops {tenant.workspace_id}")
    return runtime.webhooks.register(
        workspace_id=tenant.workspace_id, definition=definition
    ).webhook_id


def good(webhook_id: str, n: int) -> Notification:
    return Notification(
        webhook_id,
        {"file_url": f"https://files.example/{n}.csv?sig=secret", "filename": f"f{n}.csv"},
        None,
    )


def _group_plan(webhook_id: str) -> list[tuple[str, Notification]]:
    """40 good notifications, and among them refused ones and keyed ones."""
    plan: list[tuple[str, Notification]] = []
    for n in range(1, 41):
        plan.append(("good", good(webhook_id, n)))
        if n % 10 == 3:
            plan.append(("no url", Notification(webhook_id, {"filename": "x.csv"}, None)))
        if n % 10 == 5:
            plan.append(("unknown", Notification("wh_" + "x" * 40, {"file_url": "x"}, None)))
        if n % 10 == 7:  # retries of one notification (another field may differ)
            retry = {**good(webhook_id, 7).payload, "attempt": n}
            plan.append(("keyed", Notification(webhook_id, retry, "k1")))
        if n % 10 == 9:  # the key with another file: refused, alone
            plan.append(("reused", Notification(webhook_id, good(webhook_id, n).payload, "k1")))
    return plan


def test_a_group_answers_every_caller_and_queues_every_file_with_its_event(
    runtime: Runtime,
) -> None:
    webhook_id = register(runtime)
    intake = NotificationIntake(runtime.engine, secret_box(runtime.settings), deadline_seconds=3600)
    try:
        first = intake.submit(good(webhook_id, 0))  # taken alone, then waits for the lock
        plan = _group_plan(webhook_id)
        with write_lock_held(runtime.engine):
            futures: list[Future[AcceptedNotification]] = [
                intake.submit(notification) for _, notification in plan
            ]
        assert first.result(timeout=30).created
        answers: dict[int, str] = {}  # file id -> filename it must hold
        keyed_ids = set()
        for (kind, notification), future in zip(plan, futures, strict=True):
            if kind == "no url":
                with pytest.raises(InvalidNotificationError, match="file_url"):
                    future.result(timeout=30)
            elif kind == "unknown":
                with pytest.raises(WebhookNotFoundError):
                    future.result(timeout=30)
            elif kind == "keyed":
                keyed_ids.add(future.result(timeout=30).file_id)
            elif kind == "reused":
                with pytest.raises(IdempotencyKeyReusedError, match="from another URL"):
                    future.result(timeout=30)
            else:
                accepted = future.result(timeout=30)
                assert accepted.created
                assert accepted.status_code == 200
                answers[accepted.file_id] = notification.payload["filename"]
    finally:
        intake.close()
    assert len(keyed_ids) == 1  # one Idempotency-Key, one file, whatever the group
    assert len(answers) == 40
    with runtime.engine.connect() as conn:
        stored = {
            row.id: (row.filename, row.url_redacted, row.status)
            for row in conn.execute(select(files)).all()
        }
        events = conn.execute(
            select(outbox_events).where(outbox_events.c.type == "file.accepted")
        ).all()
    for file_id, filename in answers.items():
        number = filename.removeprefix("f").removesuffix(".csv")
        assert stored[file_id] == (filename, f"https://files.example/{number}.csv", "queued")
    assert len(stored) == 40 + 1 + 1  # the group's files, the first one, the keyed one
    assert sorted(e.file_id for e in events) == sorted(stored)
    for event in events:  # each event describes its own file
        assert event.topic == outbox.STATUS_CALLBACK
        assert event.payload["file_id"] == event.file_id
        assert event.payload["filename"] == stored[event.file_id][0]
        assert event.payload["status"] == "queued"


class _BoxFailingOn(SecretBox):
    """A real box that fails, as an unforeseen bug would, on one URL."""

    def __init__(self, key: bytes, poison: str) -> None:
        super().__init__(key)
        self._poison = poison

    def seal(self, clear: str) -> str:
        if self._poison in clear:
            raise RuntimeError("unforeseen")
        return super().seal(clear)


def test_an_unforeseen_failure_fails_its_own_notification_not_its_group(
    runtime: Runtime,
) -> None:
    """The group's transaction rolls back; every other notification of the group is
    then accepted on its own, so one caller's failure is never another's."""
    webhook_id = register(runtime)
    box = _BoxFailingOn(SecretBox.new_key(), "poison")
    intake = NotificationIntake(runtime.engine, box, deadline_seconds=3600)
    poisoned = Notification(webhook_id, {"file_url": "https://files.example/poison.csv"}, None)
    try:
        first = intake.submit(good(webhook_id, 0))
        plan = [good(webhook_id, n) for n in range(1, 11)]
        plan.insert(5, poisoned)
        with write_lock_held(runtime.engine):
            futures = [intake.submit(notification) for notification in plan]
        assert first.result(timeout=30).created
        outcomes = []
        for notification, future in zip(plan, futures, strict=True):
            if notification is poisoned:
                with pytest.raises(RuntimeError, match="unforeseen"):
                    future.result(timeout=30)
            else:
                outcomes.append(future.result(timeout=30).created)
    finally:
        intake.close()
    assert outcomes == [True] * 10
    with runtime.engine.connect() as conn:
        assert len(conn.execute(select(files)).all()) == 11
        events = conn.execute(select(outbox_events)).all()
    assert len([e for e in events if e.type == "file.accepted"]) == 11


def test_a_group_without_keys_is_queued_whole_with_its_rejections_alone(
    runtime: Runtime,
) -> None:
    """On PostgreSQL such a group is two statements (decision 0021): the webhooks and
    reserved ids, then every file and event in one. Rejections leave gaps in the ids,
    never a file; each caller's file id is the row holding its file."""
    webhook_id = register(runtime)
    intake = NotificationIntake(runtime.engine, secret_box(runtime.settings), deadline_seconds=3600)
    try:
        first = intake.submit(good(webhook_id, 0))
        plan = []
        for n in range(1, 31):
            plan.append(good(webhook_id, n))
            if n % 10 == 4:
                plan.append(Notification(webhook_id, {"filename": "no-url.csv"}, None))
            if n % 10 == 8:
                plan.append(Notification("wh_" + "y" * 40, {"file_url": "x"}, None))
        with write_lock_held(runtime.engine):
            futures = [intake.submit(notification) for notification in plan]
        assert first.result(timeout=30).created
        answers: dict[int, str] = {}
        for notification, future in zip(plan, futures, strict=True):
            if "file_url" not in notification.payload:
                with pytest.raises(InvalidNotificationError, match="file_url"):
                    future.result(timeout=30)
            elif notification.webhook_id != webhook_id:
                with pytest.raises(WebhookNotFoundError):
                    future.result(timeout=30)
            else:
                answers[future.result(timeout=30).file_id] = notification.payload["filename"]
    finally:
        intake.close()
    assert len(answers) == 30
    with runtime.engine.connect() as conn:
        stored = {row.id: row for row in conn.execute(select(files)).all()}
        events = conn.execute(select(outbox_events)).all()
    assert len(stored) == 31
    for file_id, filename in answers.items():
        assert stored[file_id].filename == filename
        assert stored[file_id].status == "queued"
        assert stored[file_id].attempts == 0
    assert sorted(e.file_id for e in events) == sorted(stored)
    assert all(e.payload["filename"] == stored[e.file_id].filename for e in events)


def reserved_rows(
    conn: Connection, runtime: Runtime, webhook_id: str, count: int, now: dt.datetime
) -> list[dict[str, Any]]:
    """`count` notified file rows of one webhook, each with an id the look-up reserved."""
    hooks, ids = notified_groups.look_up(conn, {hash_secret(webhook_id)}, count)
    (webhook,) = hooks.values()
    box = secret_box(runtime.settings)
    rows = [
        notified_file(
            box,
            webhook,
            good(webhook_id, n).payload,
            idempotency_key=None,
            deadline_seconds=60,
            now=now,
        )
        for n in range(count)
    ]
    for row, file_id in zip(rows, ids, strict=True):
        row["id"] = file_id
    return rows


@ON_POSTGRESQL
def test_queued_records_are_the_rows_stored(runtime: Runtime) -> None:
    """The two-statement path answers from the rows it built, not from a RETURNING:
    each record must equal the stored row read back."""
    webhook_id = register(runtime)
    now = utc_now()
    with autocommit_connection(runtime.engine) as conn:
        rows = reserved_rows(conn, runtime, webhook_id, 3, now)
        records = queue_notified_files_at_once(conn, rows, now)
    with runtime.engine.connect() as conn:
        assert [get_file(conn, record.id) for record in records] == records


@ON_POSTGRESQL
def test_a_group_whose_statement_fails_writes_nothing(runtime: Runtime) -> None:
    """Files and events are one statement: an event the database refuses (here of a
    source deleted after the look-up) leaves none of the group's files either."""
    webhook_id = register(runtime)
    now = utc_now()
    with autocommit_connection(runtime.engine) as conn:
        rows = reserved_rows(conn, runtime, webhook_id, 2, now)
        events = file_events.event_rows(
            file_events.ACCEPTED, [FileRecord.from_values(row) for row in rows], now
        )
        events[1]["resource_id"] = 2**31 - 1  # no such source
        with pytest.raises(IntegrityError):
            notified_groups.queue(conn, rows, events)
    with runtime.engine.connect() as conn:
        assert conn.execute(select(files)).all() == []
        assert conn.execute(select(outbox_events)).all() == []
