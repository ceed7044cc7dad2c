"""Publishing what a derived run built (decision 0016): a whole output swapped in by one
short transaction, then finished as a source is after its load (its rows' JSON text,
its indexes), the table it replaced discarded and its companion swapped in; or an
incremental run's patch applied to the published output in one short transaction.
Every transaction renews the run's lease first (`guard`); a publish that changed the
output queues its readers' runs, after the burst."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.errors import RunFailedError
from tally.services.derived import history
from tally.services.derived.builders import Output, Patch
from tally.services.derived.phases import Steps
from tally.storage import resources
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import records as derived_records
from tally.storage.derived.outputs import Guard
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import write_connection
from tally.storage.resource_tables.ddl import PartialIndex

log = logging.getLogger("tally.derived")


class Publisher:
    """The publishing steps every kind of derived run shares, after its builder staged
    the output (or the patch)."""

    def __init__(self, engine: Engine, *, burst_seconds: float) -> None:
        self._engine = engine
        self._burst_seconds = burst_seconds

    def publish_output(
        self,
        record: DerivedRecord,
        output: Output,
        published: bool,
        guard: Guard,
        started: dt.datetime,
        steps: Steps,
    ) -> None:
        """Swap in the staged output (when `published`: its digest differs from the
        published one's), then finish it, discard what it replaced, swap in its
        companion and record the run. Readable from the swap on, answered by scans until
        its indexes are there (decision 0010: the trade a source's load makes); its
        pages render its rows, which keep no JSON text (storage/derived/outputs.py).
        The lease is held throughout, so no other run can swap the table while it is
        indexed; a run taken over after the swap only finishes it."""
        resource_id = record.resource_id
        version = None
        if published:
            steps.begin("publish")
            with write_connection(self._engine) as conn, conn.begin():
                guard(conn)
                now = utc_now()
                _check_inputs(conn, output.inputs)
                resource = resources.lock_resource(conn, resource_id)
                version = derived_outputs.publish(
                    conn, resource, output.layout.columns, output.row_count, now
                )
                derived_records.record_output(conn, record.id, output.digest)
                self._queue_readers(conn, resource_id, now)
            log.info("derived_output_readable", extra={"derived_id": record.id})
        self._finish(resource_id, guard, steps, output.indexes)
        derived_outputs.discard(self._engine, derived_outputs.old_table(resource_id), guard)
        if version is None:
            with self._engine.connect() as conn:
                version = resources.get_resource(conn, resource_id).data_version
        companion = output.companion
        if companion is not None and (published or not _describes(record.run_basis, version)):
            steps.begin("companion")
            companion.stage(self._engine, guard)
            with write_connection(self._engine) as conn, conn.begin():
                guard(conn)
                companion.swap(conn)
            companion.discard(self._engine, guard)
        steps.end()
        with write_connection(self._engine) as conn, conn.begin():
            guard(conn)
            now = utc_now()
            if not published:
                _check_inputs(conn, output.inputs)
            _record_success(conn, record, output, started, now, version, output.row_count, steps)
            if output.after_publish is not None:
                output.after_publish(conn, now)
        log.info(
            "derived_run_finished",
            extra={
                "derived_id": record.id,
                "rows": output.row_count,
                "published": published,
                "seconds": {k: round(v, 3) for k, v in steps.seconds.items()},
            },
        )

    def publish_patch(
        self,
        record: DerivedRecord,
        patch: Patch,
        guard: Guard,
        started: dt.datetime,
        steps: Steps,
    ) -> None:
        """Publish an incremental run: what it needs staged, then one short transaction
        changes the published output in place, bumps its data version (when anything
        changed), queues its readers and records the run."""
        # nothing, unless the whole run before this one stopped before it finished the
        # output it published: then first that (the patch keeps a finished output so)
        self._finish(record.resource_id, guard, steps, patch.indexes)
        if patch.changes and patch.stage is not None:
            steps.begin("stage")
            patch.stage(self._engine, guard)
        steps.begin("publish")
        with write_connection(self._engine) as conn, conn.begin():
            guard(conn)
            _check_inputs(conn, patch.inputs)
            resource = resources.lock_resource(conn, record.resource_id)
            version = resource.data_version
            row_count = patch.apply(conn) if patch.changes else resource.row_count
            now = utc_now()  # the run's end: its rows are in place
            if patch.changes:
                plan = derived_outputs.plan_table(record.resource_id)
                derived_outputs.drop(conn, plan)  # small: the patch's rows only
                version = derived_outputs.republish(conn, resource, row_count, now)
                self._queue_readers(conn, record.resource_id, now)
            steps.end()  # (its last statements' seconds are not the split's)
            _record_success(conn, record, patch, started, now, version, row_count, steps)
            if patch.after_publish is not None:
                patch.after_publish(conn, now)
        log.info("derived_output_readable", extra={"derived_id": record.id})
        log.info(
            "derived_run_finished",
            extra={
                "derived_id": record.id,
                "incremental": True,
                "seconds": {k: round(v, 3) for k, v in steps.seconds.items()},
            },
        )

    def _finish(
        self,
        resource_id: int,
        guard: Guard,
        steps: Steps,
        partial: Sequence[PartialIndex],
    ) -> None:
        """What the published output still lacks (`derived_outputs.finish`, with the
        kind's `partial` indexes), a step of its own when it lacks anything (a run's
        indexing shown only when there is some)."""
        with self._engine.connect() as conn:
            output = resources.get_resource(conn, resource_id)
        if derived_outputs.is_finished(output):
            return
        steps.begin("finish")
        derived_outputs.finish(self._engine, resource_id, guard, partial)

    def _queue_readers(self, conn: Connection, resource_id: int, now: dt.datetime) -> None:
        due = now + dt.timedelta(seconds=self._burst_seconds)
        for reader in derived_records.readers_of(conn, resource_id):
            derived_records.request_run(conn, reader, due)


def _record_success(
    conn: Connection,
    record: DerivedRecord,
    result: Output | Patch,
    started: dt.datetime,
    now: dt.datetime,
    version: int | None,
    rows: int,
    steps: Steps,
) -> None:
    """The run is over: its `last_run` (with the seconds of each phase), the digest of
    the output it leaves (`version`) and what it read; and the run in the history, with
    the output's `rows`."""
    history.record_succeeded(conn, record.id, started=started, now=now, rows=rows)
    derived_records.record_success(
        conn,
        record.id,
        now=now,
        last_run=_last_run(started, now, result.summary, steps.phases()),
        output_digest=result.digest,
        run_basis=_basis(result.basis, version),
    )


def _last_run(
    started: dt.datetime, now: dt.datetime, summary: dict[str, Any], phases: dict[str, float]
) -> dict[str, Any]:
    return {
        "started_at": started.isoformat(),
        "finished_at": now.isoformat(),
        **summary,
        "phases": phases,
    }


def _basis(basis: dict[str, Any] | None, output_version: int | None) -> dict[str, Any] | None:
    """What the run read, with the output's data version it left (a later run that finds
    another version, or none, knows the output is not the one this basis describes)."""
    if basis is None or output_version is None:
        return None
    return {**basis, "output_version": output_version}


def _describes(basis: dict[str, Any] | None, output_version: int) -> bool:
    """The recorded basis is that of this very output (its companion is in place: it is
    swapped in before the basis is recorded)."""
    return basis is not None and basis.get("output_version") == output_version


def _check_inputs(conn: Connection, inputs: Mapping[int, tuple[Column, ...]]) -> None:
    """The inputs' columns are still those the run read (a file that brought more
    fractional digits rescales a column's stored values): else the run is redone."""
    for resource_id, columns in inputs.items():
        if resources.get_resource(conn, resource_id).columns != columns:
            raise RunFailedError(f"resource {resource_id} changed its columns during the run")
