"""A file's life after it was accepted: claim -> download -> load -> outbox.

Exactly once: the rows, the file's final status and the outbox events commit in one
transaction, and only while the worker still holds the file's lease. A worker killed
at any point leaves either nothing (the lease expires, another worker starts again)
or everything.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from threading import Event

import orjson
from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.errors import FetchError, LoadError
from tally.core.files import FileRecord, FileStatus
from tally.core.sealing import SecretBox
from tally.net.fetch import AddressPolicy, Credentials, FetchLimits, open_download
from tally.services import file_events
from tally.services.catalogue import SourceCatalogue
from tally.services.file_loading import FileLoading
from tally.storage import file_attempts, files, webhooks
from tally.storage.blobs import BlobStore
from tally.storage.db_errors import failure_summary
from tally.storage.engine import write_connection

log = logging.getLogger("tally.delivery")


@dataclass(frozen=True)
class DeliveryPolicy:
    limits: FetchLimits
    addresses: AddressPolicy
    deadline_seconds: float
    retry_base_seconds: float
    retry_max_seconds: float
    lease_seconds: float
    max_attempts: int


def retry_delay_seconds(policy: DeliveryPolicy, attempts: int, retry_after: float | None) -> float:
    """Exponential backoff with full jitter, never sooner than the server asked."""
    ceiling = min(policy.retry_max_seconds, policy.retry_base_seconds * 2 ** (attempts - 1))
    delay = random.uniform(ceiling / 2, ceiling)  # noqa: S311 - jitter, not a secret
    return max(delay, retry_after or 0.0)


class DeliveryService:
    """Claims files and takes each to its end; `worker` names the lease holder."""

    def __init__(
        self,
        engine: Engine,
        box: SecretBox,
        blobs: BlobStore,
        policy: DeliveryPolicy,
        catalogue: SourceCatalogue,
        loading: FileLoading,
    ) -> None:
        self._engine = engine
        self._box = box
        self._blobs = blobs
        self.policy = policy
        self._catalogue = catalogue
        self._loading = loading

    def claim_file(self, *, worker: str) -> FileRecord | None:
        with write_connection(self._engine) as conn, conn.begin():
            return files.claim_next_file(
                conn, worker=worker, now=utc_now(), lease_seconds=self.policy.lease_seconds
            )

    def listen_for_files(self, on_queued: Callable[[], None], stop: Event) -> None:
        """Call `on_queued` whenever files are queued, until `stop` is set (on SQLite,
        only files this process queued: other processes' are found by polling). The
        loads' pace hears of them too: the API is accepting notifications."""
        pace = self._loading.pace

        def heard() -> None:
            if pace is not None:
                pace.files_queued()
            on_queued()

        files.listen_for_queued_files(self._engine, heard, stop)

    def renew_lease(self, file_id: int, *, worker: str) -> bool:
        with write_connection(self._engine) as conn, conn.begin():
            return files.extend_lease(conn, file_id, worker, utc_now(), self.policy.lease_seconds)

    def process_file(
        self,
        file: FileRecord,
        *,
        worker: str,
        on_delivered: Callable[[], object] | None = None,
    ) -> None:
        """Take a claimed file one step to its end (or back to the queue). Once its rows
        are committed, `on_delivered` runs before the rows are finished (the worker
        queues the derived runs they ask for: finishing takes a while)."""
        if self._give_up_if_spent(file, worker):
            return
        try:
            blob = (
                Path(file.blob_path)
                if file.blob_path and file.sha256
                else self._download(file, worker)
            )
        except FetchError as error:
            self._retry_or_fail(
                file,
                worker,
                error.message,
                transient=error.transient,
                retry_after=error.retry_after_seconds,
            )
            return
        try:
            result = self._loading.load(file, worker, blob)
        except LoadError as error:
            self._fail(file, worker, error.message)
            return
        self._loading.discard_leftovers(file)  # of attempts killed before this one
        if result is not None:
            log.info("file_delivered", extra={"file_id": file.id, "rows": result.rows})
            if on_delivered is not None:
                on_delivered()
        # The rows are readable and the file reported; what is left (the rows' JSON text,
        # a first delivery's indexes) is done at once by this worker.
        self._catalogue.finish_resource(file.resource_id)

    def _credentials(self, file: FileRecord) -> Credentials | None:
        if file.webhook_id is None:
            return None
        with self._engine.connect() as conn:
            webhook = webhooks.get_webhook(conn, file.webhook_id)
        if webhook.credentials_encrypted is None:
            return None
        data = orjson.loads(self._box.open(webhook.credentials_encrypted))
        kind = data.pop("type")
        return Credentials(kind=kind, **data)

    def _download(self, file: FileRecord, worker: str) -> Path:
        assert file.url_encrypted is not None
        with write_connection(self._engine) as conn, conn.begin():
            files.set_progress(conn, file.id, worker, status=FileStatus.DOWNLOADING, now=utc_now())
        with open_download(
            self._box.open(file.url_encrypted),
            credentials=self._credentials(file),
            limits=self.policy.limits,
            policy=self.policy.addresses,
        ) as download:
            blob = self._blobs.write(
                self._blobs.path_for(file.resource_id, file.id), download.chunks
            )
        with write_connection(self._engine) as conn, conn.begin():
            files.set_progress(
                conn,
                file.id,
                worker,
                status=FileStatus.LOADING,
                now=utc_now(),
                blob_path=str(blob.path),
                bytes=blob.size,
                sha256=blob.sha256,
            )
        return blob.path

    def _fail(
        self, file: FileRecord, worker: str, reason: str, *, tried: bool = True, **values: int
    ) -> None:
        """`failed` for good; `tried`: this claim made an attempt, recorded with `reason`."""
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            if not files.holds_lease(conn, file.id, worker, now, lock=True):
                return
            files.finish(conn, file.id, status=FileStatus.FAILED, now=now, error=reason, **values)
            if tried:
                file_attempts.record_attempt(
                    conn,
                    file.id,
                    attempt_number=file.attempts,
                    error=reason,
                    now=now,
                    next_attempt_at=None,
                )
            file_events.queue_event(
                conn, event=file_events.FAILED, resource_id=file.resource_id, file=file, now=now
            )
        log.warning("file_failed", extra={"file_id": file.id, "reason": reason})
        self._loading.discard_leftovers(file)  # what a killed attempt left

    def sweep_leftovers(self) -> int:
        """Remove what killed loads left of files that have ended since (or are gone)."""
        return self._loading.discard_leftovers()

    def fail_crashed(self, file: FileRecord, error: BaseException, *, worker: str) -> None:
        """A file's job raised what nobody expected: retried like a transient failure,
        so a poison file ends `failed` within its attempts, naming what went wrong."""
        log.error("file_crashed", exc_info=error, extra={"file_id": file.id})
        message = f"the file could not be loaded: {failure_summary(error)}"
        self._retry_or_fail(file, worker, message, transient=True)

    def _give_up_if_spent(self, file: FileRecord, worker: str) -> bool:
        """Fail a claimed file past its deadline, or claimed more often than its attempts
        allow (the earlier ones ended without an outcome: a worker stopped or crashed)."""
        if file.attempts > self.policy.max_attempts:
            self._fail(
                file,
                worker,
                f"gave up after {self.policy.max_attempts} attempts: none of them finished "
                "(the worker handling the file stopped or crashed)",
                tried=False,
            )
            return True
        if utc_now() > file.give_up_at:  # (a retry due before it, claimed after it)
            last = f"; the last attempt: {file.error}" if file.error else ""
            # This claim tried nothing: `attempts` counts the attempts made.
            reason = f"not delivered within the delivery deadline{last}"
            self._fail(file, worker, reason, tried=False, attempts=file.attempts - 1)
            return True
        return False

    def _retry_or_fail(
        self,
        file: FileRecord,
        worker: str,
        message: str,
        *,
        transient: bool,
        retry_after: float | None = None,
    ) -> None:
        """Back to the queue with backoff, or `failed`: a permanent failure, or the file
        is out of attempts or time."""
        now = utc_now()
        delay = retry_delay_seconds(self.policy, file.attempts, retry_after)
        next_attempt = now + dt.timedelta(seconds=delay)
        if not transient:
            self._fail(file, worker, message)
            return
        if next_attempt > file.give_up_at or file.attempts >= self.policy.max_attempts:
            self._fail(file, worker, f"{message} (gave up after {file.attempts} attempts)")
            return
        with write_connection(self._engine) as conn, conn.begin():
            # only while the lease holds: a file that ended (or another worker took) stays
            if not files.holds_lease(conn, file.id, worker, now, lock=True):
                return
            files.schedule_retry(
                conn, file.id, error=message, next_attempt_at=next_attempt, now=now
            )
            file_attempts.record_attempt(
                conn,
                file.id,
                attempt_number=file.attempts,
                error=message,
                now=now,
                next_attempt_at=next_attempt,
            )
        log.info("file_retry_scheduled", extra={"file_id": file.id, "delay_seconds": delay})
