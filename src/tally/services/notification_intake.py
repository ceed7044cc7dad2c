"""Webhook notifications accepted in groups: many callers, one commit.

Each notification must be durably queued before its reply. One transaction per request
makes the database's commit the bottleneck (on SQLite, one writer at a time); here a
single thread takes every notification waiting at that moment, queues them all in one
transaction, commits once, then answers each caller. A caller waits for at most one
commit more than it would alone, and the service accepts many times more per second.
A notification that fails on its own (unknown webhook, no URL) fails alone. What one
notification queues is services/notified_files.py.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.errors import TallyError, WebhookNotFoundError
from tally.core.files import FileRecord
from tally.core.ids import hash_secret
from tally.core.sealing import SecretBox
from tally.services.notified_files import (
    AcceptedNotification,
    accept_in_transaction,
    accepted_reply,
    notified_file,
    queue_notified_files,
    queue_notified_files_at_once,
)
from tally.storage import notified_groups, webhooks
from tally.storage.engine import autocommit_connection, backend_of, write_connection

log = logging.getLogger("tally.intake")

MAX_GROUP = 256


@dataclass(frozen=True)
class Notification:
    webhook_id: str
    payload: Any
    idempotency_key: str | None


_Pending = tuple[Notification, "Future[AcceptedNotification]"]
_Batched = tuple[webhooks.WebhookRecord, "Future[AcceptedNotification]"]


class NotificationIntake:
    """Queues notified files in groups; `submit` returns a future of the reply."""

    def __init__(self, engine: Engine, box: SecretBox, *, deadline_seconds: float) -> None:
        self._engine = engine
        self._in_two_statements = backend_of(engine).queues_groups_in_two_statements
        self._box = box
        self._deadline_seconds = deadline_seconds
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, notification: Notification) -> Future[AcceptedNotification]:
        self._ensure_started()
        future: Future[AcceptedNotification] = Future()
        self._queue.put((notification, future))
        return future

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _ensure_started(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tally-intake", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            group = [first]
            stop = False
            while len(group) < MAX_GROUP:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                group.append(item)
            self._accept_group(group)
            if stop:
                return

    def _accept_group(self, group: list[_Pending]) -> None:
        try:
            outcomes = self._accept(group, utc_now())
        except Exception as error:  # rolled back: nobody was accepted
            if len(group) > 1:
                # Nothing was written, so each is tried again on its own: a notification
                # that fails unexpectedly fails alone, not every caller grouped with it.
                log.warning("intake_group_split", extra={"size": len(group)})
                for pending in group:
                    self._accept_group([pending])
                return
            log.exception("intake_failed")
            group[0][1].set_exception(error)
            return
        for settle in outcomes:  # answers only after the commit
            settle()

    def _accept(self, group: list[_Pending], now: dt.datetime) -> list[Callable[[], None]]:
        """Each notification's answer, to give once the group is committed."""
        if self._in_two_statements and all(n.idempotency_key is None for n, _ in group):
            return self._accept_in_two_statements(group, now)
        with write_connection(self._engine) as conn, conn.begin():
            return self._accept_in(conn, group, now)

    def _accept_in_two_statements(
        self, group: list[_Pending], now: dt.datetime
    ) -> list[Callable[[], None]]:
        """PostgreSQL (decision 0021): the group's webhooks and ids for its files in one
        statement, the files and their events in another, each its own transaction."""
        webhook_ids = {notification.webhook_id for notification, _ in group}
        hashes = {webhook_id: hash_secret(webhook_id) for webhook_id in webhook_ids}
        with autocommit_connection(self._engine) as conn:
            hooks, ids = notified_groups.look_up(conn, hashes.values(), len(group))

            def find(webhook_id: str) -> webhooks.WebhookRecord | None:
                return hooks.get(hashes[webhook_id])

            outcomes, rows, batch = self._file_rows(group, find, now)
            for row, file_id in zip(rows, ids, strict=False):  # ids: one per notification
                row["id"] = file_id
            records = queue_notified_files_at_once(conn, rows, now) if rows else []
        return outcomes + _replies(batch, records)

    def _accept_in(
        self, conn: Connection, group: list[_Pending], now: dt.datetime
    ) -> list[Callable[[], None]]:
        """In the caller's transaction: files without an Idempotency-Key inserted
        together (one multi-row INSERT for the files, one for their events); a keyed
        one checked and inserted on its own."""
        hooks: dict[str, webhooks.WebhookRecord | None] = {}  # by webhook id, one look-up

        def find(webhook_id: str) -> webhooks.WebhookRecord | None:
            if webhook_id not in hooks:
                hooks[webhook_id] = webhooks.find_webhook_by_hash(conn, hash_secret(webhook_id))
            return hooks[webhook_id]

        keyed = [pending for pending in group if pending[0].idempotency_key is not None]
        outcomes = [self._accept_keyed(conn, find, *pending, now) for pending in keyed]
        unkeyed = [pending for pending in group if pending[0].idempotency_key is None]
        rejected, rows, batch = self._file_rows(unkeyed, find, now)
        return outcomes + rejected + _replies(batch, queue_notified_files(conn, rows, now))

    def _accept_keyed(
        self,
        conn: Connection,
        find: Callable[[str], webhooks.WebhookRecord | None],
        notification: Notification,
        future: Future[AcceptedNotification],
        now: dt.datetime,
    ) -> Callable[[], None]:
        webhook = find(notification.webhook_id)
        try:
            if webhook is None:
                raise WebhookNotFoundError()
            accepted = accept_in_transaction(
                conn,
                self._box,
                webhook,
                payload=notification.payload,
                idempotency_key=notification.idempotency_key,
                deadline_seconds=self._deadline_seconds,
                now=now,
            )
        except TallyError as error:
            return partial(future.set_exception, error)
        return partial(future.set_result, accepted)

    def _file_rows(
        self,
        group: list[_Pending],
        find: Callable[[str], webhooks.WebhookRecord | None],
        now: dt.datetime,
    ) -> tuple[list[Callable[[], None]], list[dict[str, Any]], list[_Batched]]:
        """(the answers of the notifications refused, the file rows of the others, and
        those others by webhook): rejections happen before anything is written."""
        rejected: list[Callable[[], None]] = []
        rows: list[dict[str, Any]] = []
        batch: list[_Batched] = []
        for notification, future in group:
            webhook = find(notification.webhook_id)
            try:
                if webhook is None:
                    raise WebhookNotFoundError()
                rows.append(
                    notified_file(
                        self._box,
                        webhook,
                        notification.payload,
                        idempotency_key=None,
                        deadline_seconds=self._deadline_seconds,
                        now=now,
                    )
                )
            except TallyError as error:
                rejected.append(partial(future.set_exception, error))
                continue
            batch.append((webhook, future))
        return rejected, rows, batch


def _replies(batch: list[_Batched], records: list[FileRecord]) -> list[Callable[[], None]]:
    return [
        partial(future.set_result, accepted_reply(webhook, record, True))
        for (webhook, future), record in zip(batch, records, strict=True)
    ]
