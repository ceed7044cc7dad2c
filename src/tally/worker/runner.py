"""The worker loop: N threads, each claiming the next due job from the database.

Jobs are file deliveries, status callbacks, what loads leave to the workers (rows'
stored JSON text, a new source's indexes), and runs of derived resources (reconciliations)
queued by deliveries to their inputs (the run's service renews its lease itself). A
thread holding a file renews its lease in the background, so a slow download is not
taken over by another worker; a killed worker stops renewing and its file is taken up
again when the lease expires. Graceful stop: the threads finish the job in hand, then
exit. Idle threads poll, and a listener wakes them as soon as files are queued: by any
process on PostgreSQL, by this one on SQLite (`tally serve`'s API and its worker)."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from functools import partial

from tally.runtime import Runtime
from tally.services.heartbeat import Heartbeat

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

    def _jobs(self, worker: str) -> list[Job]:
        """One thread's jobs, in the order it tries them; `worker` names its leases."""
        callbacks = self._runtime.callbacks
        derived = self._runtime.derived
        return [
            lambda: self.deliver_one(worker),
            callbacks.fan_out,
            lambda: callbacks.send_one(worker=worker),
            self.queue_derived_runs,
            lambda: derived.run_one(worker=worker),
            self._runtime.catalogue.finish_one_unfinished,
        ]

    def queue_derived_runs(self) -> bool:
        """Queue the runs that deliveries asked for, and wake the idle threads: one of
        them then waits only until the first run falls due, not a whole poll (the
        thread that queued it may be busy finishing the delivered rows)."""
        queued = self._runtime.derived.queue_changed_inputs()
        if queued:
            self._wake.set()
        return queued

    def _queue_after_delivery(self) -> None:
        """The runs a delivery asks for, queued as soon as its rows are committed, not
        after this thread has finished them (their JSON text): the burst starts then."""
        try:
            self.queue_derived_runs()
        except Exception:  # the loop's own job queues them on its next round
            log.exception("job_crashed")

    def deliver_one(self, worker: str) -> bool:
        """Deliver the next file due, if any (False when none), renewing its lease meanwhile:
        the loop's first job, public so a test can run one delivery without threads."""
        delivery = self._runtime.delivery
        file = delivery.claim_file(worker=worker)
        if file is None:
            return False
        heartbeat = Heartbeat(
            partial(delivery.renew_lease, file.id, worker=worker),
            lease_seconds=delivery.policy.lease_seconds,
            log=log,
            failure_event="lease_renewal_failed",
            context={"file_id": file.id},
        )
        with heartbeat:
            try:
                delivery.process_file(file, worker=worker, on_delivered=self._queue_after_delivery)
            except Exception as error:  # the job wrapper: the file still ends (decision 0013)
                delivery.fail_crashed(file, error, worker=worker)
        return True

    def _loop(self, worker: str, jobs: list[Job]) -> None:
        while not self.stopping.is_set():
            did_work = False
            for job in jobs:
                try:
                    did_work = job() or did_work
                except Exception:  # the job wrapper: record and carry on
                    log.exception("job_crashed", extra={"worker": worker})
                if self.stopping.is_set():
                    return
            if not did_work:
                # a wake-up lost between the claim and the clear costs one poll, no file
                self._wake.wait(self.idle_seconds())
                self._wake.clear()

    def idle_seconds(self) -> float:
        """How long an idle thread waits before its next round: a poll, or less when a
        derived run this process queued falls due sooner (public: a test checks it)."""
        due = self._runtime.derived.seconds_until_due()
        return self._poll_seconds if due is None else min(self._poll_seconds, due)

    def is_woken(self) -> bool:
        """Whether the idle threads are told to look for work now (files or runs were
        queued, or the worker stops) and have not looked yet: what a job that queues
        work must leave behind, which a test checks without starting the threads."""
        return self._wake.is_set()

    def _listen(self) -> None:
        """Wake idle threads when files are queued; on a lost connection, poll until a
        new one listens."""
        while not self.stopping.is_set():
            try:
                self._runtime.delivery.listen_for_files(self._wake.set, self.stopping)
                return
            except Exception:
                log.warning("queue_listener_lost", exc_info=True)
                self.stopping.wait(self._poll_seconds)

    def start(self) -> None:
        try:
            self._runtime.delivery.sweep_leftovers()
        except Exception:  # what is left is swept at the next start, or as its file ends
            log.exception("staging_sweep_failed")
        listener = threading.Thread(target=self._listen, name="tally-worker-listen", daemon=True)
        listener.start()
        for n in range(self._concurrency):
            worker = f"{socket.gethostname()}:{os.getpid()}:{n}"
            # The jobs' services are built here, before the first thread starts (the runtime
            # builds each on first use): a thread starts claiming at once, as it did
            # when the runtime built them all at the start (issue #36).
            jobs = self._jobs(worker)
            thread = threading.Thread(
                target=self._loop, args=(worker, jobs), name=f"tally-worker-{n}"
            )
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
