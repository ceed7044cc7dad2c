"""The worker loop: N threads, each claiming the next due job from the database.

Jobs are file deliveries, status notifications, and what loads leave to the workers
(rows' stored JSON text, a new source's indexes). A thread holding a file renews its
lease in the background, so a slow download is not taken over by another worker; a
killed worker stops renewing and its file is taken up again when the lease expires.
Graceful stop: the threads finish the job in hand, then exit. Idle threads poll, and on
PostgreSQL a listener wakes them as soon as files are queued.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable

from tally.runtime import Runtime
from tally.services import catalogue, delivery, notifications
from tally.services.delivery import DeliveryContext

log = logging.getLogger("tally.worker")

Job = Callable[[], bool]  # runs one job if one is due; False when there was nothing


class Worker:
    def __init__(self, runtime: Runtime, *, concurrency: int, poll_seconds: float) -> None:
        self._runtime = runtime
        self._concurrency = concurrency
        self._poll_seconds = poll_seconds
        self.stopping = threading.Event()
        self._wake = threading.Event()  # set when files were queued (PostgreSQL)
        self._threads: list[threading.Thread] = []

    def _context(self, n: int) -> DeliveryContext:
        rt = self._runtime
        name = f"{socket.gethostname()}:{os.getpid()}:{n}"
        return DeliveryContext(rt.engine, rt.box, rt.blobs, rt.delivery, name)

    def _jobs(self, ctx: DeliveryContext) -> list[Job]:
        settings = self._runtime.settings
        sender = notifications.NotificationSender(
            engine=ctx.engine,
            box=ctx.box,
            addresses=ctx.policy.addresses,
            retry_schedule_seconds=settings.retry_schedule(),
            worker=ctx.worker,
            timeout_seconds=settings.notification_timeout_seconds,
            lease_seconds=ctx.policy.lease_seconds,
        )
        return [
            lambda: self._deliver_one(ctx),
            sender.fan_out,
            sender.send_one,
            lambda: catalogue.finish_one_unfinished(ctx.engine),
        ]

    def _deliver_one(self, ctx: DeliveryContext) -> bool:
        file = delivery.claim_file(ctx)
        if file is None:
            return False
        renewing = threading.Event()
        heartbeat = threading.Thread(target=self._renew, args=(ctx, file.id, renewing), daemon=True)
        heartbeat.start()
        try:
            delivery.process_file(ctx, file)
        finally:
            renewing.set()
            heartbeat.join()
        return True

    def _renew(self, ctx: DeliveryContext, file_id: int, done: threading.Event) -> None:
        interval = ctx.policy.lease_seconds / 3
        while not done.wait(interval):
            try:
                if not delivery.renew_lease(ctx, file_id):
                    return
            except Exception:  # keep trying: a missed renewal only risks a retry
                log.exception("lease_renewal_failed", extra={"file_id": file_id})

    def _loop(self, n: int) -> None:
        ctx = self._context(n)
        jobs = self._jobs(ctx)
        while not self.stopping.is_set():
            did_work = False
            for job in jobs:
                try:
                    did_work = job() or did_work
                except Exception:  # the job wrapper: record and carry on
                    log.exception("job_crashed", extra={"worker": ctx.worker})
                if self.stopping.is_set():
                    return
            if not did_work:
                # a wake-up lost between the claim and the clear costs one poll, no file
                self._wake.wait(self._poll_seconds)
                self._wake.clear()

    def _listen(self) -> None:
        """Wake idle threads when files are queued; on a lost connection, poll until a
        new one listens."""
        while not self.stopping.is_set():
            try:
                delivery.listen_for_files(self._runtime.engine, self._wake.set, self.stopping)
                return
            except Exception:
                log.warning("queue_listener_lost", exc_info=True)
                self.stopping.wait(self._poll_seconds)

    def start(self) -> None:
        listener = threading.Thread(target=self._listen, name="tally-worker-listen", daemon=True)
        listener.start()
        for n in range(self._concurrency):
            thread = threading.Thread(target=self._loop, args=(n,), name=f"tally-worker-{n}")
            thread.start()
            self._threads.append(thread)
        log.info("worker_started", extra={"concurrency": self._concurrency})

    def stop(self) -> None:
        """Finish the jobs in hand, then return."""
        self.stopping.set()
        self._wake.set()
        for thread in self._threads:
            thread.join()
        log.info("worker_stopped")
