"""Runs of derived resources (reconciliations, transformations): queued when an input
changes, claimed by a worker with a lease, built beside the published output and
swapped in (decision 0016).

The kind-specific part is a `Builder` (services/derived/builders.py): it reads one
consistent snapshot of the inputs and says what the output holds (`Output`). Everything
else is here and shared: the queue (`run_due_at`, one run per burst of changes), the
lease and its heartbeat, the bounded attempts, the phase a run is in (phases.py) and
the staged output; the `Publisher`
(services/derived/publishing.py) swaps it in or applies the patch, and queues the
readers of an output that changed.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.errors import ResourceNotFoundError, RunFailedError, TallyError
from tally.processes.collector import paused_collector
from tally.services.derived import history
from tally.services.derived.builders import READ_DATE, Builder, Output, Patch, StagingBuilder
from tally.services.derived.phases import STARTING, Steps
from tally.services.derived.publishing import Publisher
from tally.services.heartbeat import Heartbeat
from tally.storage import outbox
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import plans as derived_plans
from tally.storage.derived import records as derived_records
from tally.storage.derived.outputs import Guard
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import write_connection

log = logging.getLogger("tally.derived")

EVENTS_PER_ROUND = 500  # outbox events turned into queued runs per transaction
WAIT_POLL_SECONDS = 0.2  # how often `run_now` looks at a run another worker holds


@dataclass(frozen=True)
class RunPolicy:
    lease_seconds: float
    max_attempts: int  # failed runs in a row before the state is `failed`
    retry_base_seconds: float  # first retry's delay; doubles each failed run
    retry_max_seconds: float
    burst_seconds: float  # a change queues a run this much later: one run per burst
    wait_seconds: float  # longest `run_now` waits for a run another worker holds


class LeaseLostError(Exception):
    """Another worker holds the run now (this one's lease expired): stop writing."""


class DerivedRuns:
    def __init__(
        self,
        engine: Engine,
        policy: RunPolicy,
        builders: Mapping[str, Builder | StagingBuilder],
        staging_dir: Path,
    ):
        self._engine = engine
        self._staging_dir = staging_dir  # SQLite: where whole runs write their plans
        self.policy = policy
        self._builders = builders
        self._publisher = Publisher(engine, burst_seconds=policy.burst_seconds)
        # When the earliest run this process queued falls due (time.monotonic()): an idle
        # worker wakes then instead of a poll later. Runs other processes queue are
        # found by polling.
        self._next_due = float("inf")
        self._date: str | None = None  # the UTC date `queue_new_date` last looked at

    # --- the queue ------------------------------------------------------------------

    def queue_changed_inputs(self) -> bool:
        """Turn pending outbox events of the `input_changed` topic (an input's rows
        changed: a file delivered, an output republished) into one queued run of each
        derived resource reading that input, due a burst after the change (the event's
        time, written with the change: not when a worker got to it), and the runs a new
        date asks for (`queue_new_date`); False when none."""
        dated = self.queue_new_date()
        now = utc_now()
        burst = dt.timedelta(seconds=self.policy.burst_seconds)
        with write_connection(self._engine) as conn, conn.begin():
            events = outbox.list_pending(
                conn,
                outbox.INPUT_CHANGED,
                outbox.INPUT_CHANGED_BEFORE_0008,
                limit=EVENTS_PER_ROUND,
            )
            changed: dict[int, dt.datetime] = {}
            for event in events:
                first = changed.get(event.resource_id, event.created_at)
                changed[event.resource_id] = min(first, event.created_at)
            for resource_id, changed_at in sorted(changed.items()):
                for reader in derived_records.readers_of(conn, resource_id):
                    derived_records.request_run(conn, reader, changed_at + burst)
            for event in events:
                outbox.mark_processed(conn, event.id, now)
        if changed:  # (a hundredth after: the claim compares with the wall clock)
            due_in = (min(changed.values()) + burst - now).total_seconds() + 0.01
            self._next_due = min(self._next_due, time.monotonic() + max(0.0, due_in))
        return bool(events) or dated

    def queue_new_date(self) -> bool:
        """When the UTC date has changed since this process last looked (and once when
        it starts), a run, due now, of each derived resource whose last run read another
        date (a transformation reading CURRENT_DATE: `last_run.current_date`); False
        when none. Each process looks; a resource that ran today is not queued again."""
        now = utc_now()
        today = now.date().isoformat()
        if self._date == today:
            return False
        with write_connection(self._engine) as conn, conn.begin():
            stale = [
                record.id
                for record in derived_records.list_run(conn)
                if (record.last_run or {}).get(READ_DATE) not in (None, today)
            ]
            for derived_id in stale:
                derived_records.request_run(conn, derived_id, now)
        self._date = today
        if stale:
            self._next_due = min(self._next_due, time.monotonic())
        return bool(stale)

    def seconds_until_due(self) -> float | None:
        """Seconds until a run this process queued falls due (0 once: it is due now);
        None when none is ahead."""
        left = self._next_due - time.monotonic()
        if left == float("inf"):
            return None
        if left <= 0:
            self._next_due = float("inf")
            return 0.0
        return left

    # --- runs -----------------------------------------------------------------------

    def run_one(self, *, worker: str) -> bool:
        """Claim the derived resource whose run is due soonest and run it; False when
        none is due."""
        record = self._claim(worker, only=None)
        if record is None:
            return False
        self._run(record, worker)
        return True

    def run_now(self, derived_id: int, *, kind: str, worker: str) -> DerivedRecord:
        """Run it now in this process and return it once its output is readable; when
        another worker is running it, wait for that run (at most `wait_seconds`), then
        run it if it is still wanted. A run that fails raises RunFailedError."""
        asked = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            if derived_records.find_derived(conn, derived_id, kind) is None:
                raise ResourceNotFoundError()
            derived_records.request_run(conn, derived_id, asked)
            # Read after the wish, in its transaction (the row is ours until it commits):
            # when no run is under way, the next run to end was claimed after the wish
            # was written, whatever the time its claim took before its statement (a
            # claim due on an earlier wish, which this one joined, can start "before"
            # `asked`).
            wished = derived_records.find_derived(conn, derived_id, kind)
        assert wished is not None
        before = _started(wished)
        deadline = time.monotonic() + self.policy.wait_seconds
        while True:
            record = self._claim(worker, only=derived_id)
            if record is not None:
                self._run(record, worker)
            current = self._get(derived_id)
            if _ran_since(current, asked) or (
                wished.state != "running" and _started(current) not in (None, before)
            ):
                return current
            due = current.run_due_at is not None and current.run_due_at <= utc_now()
            if current.state == "failed" or (current.state != "running" and not due):
                # this wish was run, by whoever, and failed (a retry may be due later)
                raise RunFailedError(current.error or "the run did not finish")
            if time.monotonic() > deadline:
                raise RunFailedError(
                    f"another worker still runs it after {self.policy.wait_seconds:g} s"
                )
            time.sleep(WAIT_POLL_SECONDS)

    def _get(self, derived_id: int) -> DerivedRecord:
        with self._engine.connect() as conn:
            record = derived_records.find_derived(conn, derived_id)
        if record is None:
            raise ResourceNotFoundError()
        return record

    def _claim(self, worker: str, only: int | None) -> DerivedRecord | None:
        with write_connection(self._engine) as conn, conn.begin():
            return derived_records.claim_due(
                conn,
                worker=worker,
                now=utc_now(),
                lease_seconds=self.policy.lease_seconds,
                only=only,
                phase=STARTING,
            )

    def _run(self, record: DerivedRecord, worker: str) -> None:
        started = record.run_started_at or utc_now()  # its claim
        if record.attempts > self.policy.max_attempts:  # its workers died every time
            self._fail(record, worker, "the run's worker stopped before it finished", started)
            return
        log.info("derived_run_started", extra={"derived_id": record.id, "worker": worker})
        with self._heartbeat(record.id, worker):
            try:
                self._build_and_publish(record, worker, started)
            except LeaseLostError:
                log.warning("derived_lease_lost", extra={"derived_id": record.id})
            except Exception as error:
                log.exception("derived_run_failed", extra={"derived_id": record.id})
                message = error.message if isinstance(error, TallyError) else repr(error)
                self._fail(record, worker, message, started)

    def _build_and_publish(self, record: DerivedRecord, worker: str, started: dt.datetime) -> None:
        """Build the output beside the published one (or the patch of it) and publish
        it (services/derived/publishing.py), each phase written on the record as the run
        enters it."""
        steps = Steps(self._entered(record.id, worker))
        guard = self._guard(record.id, worker)
        with paused_collector():  # the inputs and the engine's millions of objects
            staged = self._stage(record, guard, steps)
        if isinstance(staged, Patch):
            self._publisher.publish_patch(record, staged, guard, started, steps)
            return
        output, published = staged
        self._publisher.publish_output(record, output, published, guard, started, steps)

    def _stage(
        self, record: DerivedRecord, guard: Guard, steps: Steps
    ) -> Patch | tuple[Output, bool]:
        """The output built and, unless its digest is the published one's, staged in
        `r_{id}_next`; whether it is to be published. An incremental run's patch is
        returned as it is, to be applied in place."""
        builder, resource_id = self._builders[record.kind], record.resource_id
        steps.begin("clear")
        derived_outputs.clear(self._engine, resource_id, guard)  # a killed run's tables
        built = (
            builder.stage(record, guard, steps)
            if isinstance(builder, StagingBuilder)
            else builder.build(record, steps)
        )
        if isinstance(built, Patch):
            return built
        output = built
        if output.digest == record.output_digest:
            derived_outputs.discard(self._engine, derived_outputs.next_table(resource_id), guard)
            return output, False
        if isinstance(builder, StagingBuilder):
            return output, True
        steps.begin("build")  # the plan and the fill (at once on SQLite)
        derived_plans.build(
            self._engine,
            resource_id,
            output.layout,
            output.rows(),
            output.row_count,
            guard,
            self._staging_dir,
        )
        return output, True

    def _guard(self, derived_id: int, worker: str) -> Callable[[Connection], None]:
        """Run first in each transaction that writes the run's tables: renews the lease
        while it is still this worker's (a lease that expired while a batch waited for
        SQLite's write lock is still its own until another worker claims it; on
        PostgreSQL the renewal locks the row until commit, so none can meanwhile). Once
        another worker has taken the run over, this one writes nothing more."""

        def guard(conn: Connection) -> None:
            lease = self.policy.lease_seconds
            if not derived_records.extend_lease(conn, derived_id, worker, utc_now(), lease):
                raise LeaseLostError()

        return guard

    def _entered(self, derived_id: int, worker: str) -> Callable[[str], None]:
        """Write the phase the run enters on its record, in a transaction of its own
        (the Data API and the loads never wait on it); once another worker has taken the
        run over, this one writes nothing more."""

        def entered(phase: str) -> None:
            with write_connection(self._engine) as conn, conn.begin():
                now = utc_now()
                if not derived_records.record_phase(conn, derived_id, worker, phase=phase, now=now):
                    raise LeaseLostError()

        return entered

    def _fail(self, record: DerivedRecord, worker: str, message: str, started: dt.datetime) -> None:
        """The failed attempt recorded (its retry due, or `failed` at the limit) and kept
        in the run history, if `worker` still held the run."""
        now = utc_now()
        retry_at = None
        if record.attempts < self.policy.max_attempts:
            delay = min(
                self.policy.retry_max_seconds,
                self.policy.retry_base_seconds * 2 ** (record.attempts - 1),
            )
            retry_at = now + dt.timedelta(seconds=delay)
        with write_connection(self._engine) as conn, conn.begin():
            held = derived_records.record_failure(
                conn, record.id, worker, now=now, error=message, retry_at=retry_at
            )
            if held:
                history.record_failed(conn, record.id, started=started, now=now, error=message)

    def _heartbeat(self, derived_id: int, worker: str) -> Heartbeat:
        """The lease renewed in the background while the run works."""

        def renew() -> bool:
            with write_connection(self._engine) as conn, conn.begin():
                lease = self.policy.lease_seconds
                return derived_records.extend_lease(conn, derived_id, worker, utc_now(), lease)

        return Heartbeat(
            renew,
            lease_seconds=self.policy.lease_seconds,
            log=log,
            failure_event="derived_lease_renewal_failed",
            name="tally-derived-lease",
        )


def _started(record: DerivedRecord) -> str | None:
    """When the record's last successful run started (its `last_run`), as stored."""
    started = (record.last_run or {}).get("started_at")
    return None if started is None else str(started)


def _ran_since(record: DerivedRecord, asked: dt.datetime) -> bool:
    started = _started(record)
    return started is not None and dt.datetime.fromisoformat(started) >= asked
