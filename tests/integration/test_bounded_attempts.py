"""Every file ends (issue #14, decision 0013), on SQLite and PostgreSQL: a file whose
workers die before an outcome, or whose deadline passed, fails at its next claim with
its reason and a `file.failed` event, instead of being claimed again forever.

A worker that dies is one that claims the file and never reports: its lease expires.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from support.databases import make_settings
from support.factories import Tenant, make_tenant
from support.hostile import ledger_csv
from support.waiting import eventually
from tally.core.clock import utc_now
from tally.core.files import FileRecord, FileStatus
from tally.runtime import Runtime, build_runtime
from tally.services.sources import SourceDefinition
from tally.storage import files, outbox
from tally.storage.blobs import BlobStore

LEASE_SECONDS = 0.2
MAX_ATTEMPTS = 2


@pytest.fixture
def short_runtime(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[Runtime]:
    settings = make_settings(
        request,
        backend,
        tmp_path / "home",
        lease_seconds=LEASE_SECONDS,
        delivery_max_attempts=MAX_ATTEMPTS,
        delivery_deadline_seconds=60.0,
    )
    runtime = build_runtime(settings)
    yield runtime
    runtime.close()


@pytest.fixture
def late_runtime(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Runtime]:
    """Every file is past its delivery deadline from the start."""
    settings = make_settings(request, backend, tmp_path / "home", delivery_deadline_seconds=0.0)
    runtime = build_runtime(settings)
    yield runtime
    runtime.close()


def queue_file(runtime: Runtime, tenant: Tenant) -> int:
    source = runtime.sources.create_source(
        workspace_id=tenant.workspace_id, definition=SourceDefinition("ledger")
    )
    staged = runtime.uploads.stage_csv([ledger_csv(3)])
    accepted = runtime.uploads.queue_upload(
        workspace_id=tenant.workspace_id,
        source_id=source.id,
        staged=staged,
        filename=None,
        idempotency_key=None,
    )
    return accepted.file_id


def claim_when_free(runtime: Runtime, worker: str) -> FileRecord:
    return eventually(
        lambda: runtime.delivery.claim_file(worker=worker),
        timeout=10,
        what="the file's lease to expire",
    )


def stored(runtime: Runtime, file_id: int) -> FileRecord:
    with runtime.engine.connect() as conn:
        return files.get_file(conn, file_id)


def failed_events(runtime: Runtime, file: FileRecord) -> int:
    with runtime.engine.connect() as conn:
        events = outbox.list_events(conn, outbox.STATUS_CALLBACK, file.resource_id)
    return sum(1 for e in events if e.file_id == file.id and e.type == "file.failed")


def test_a_file_whose_workers_die_fails_after_its_attempts(short_runtime: Runtime) -> None:
    runtime = short_runtime
    file_id = queue_file(runtime, make_tenant(runtime.engine, ingestion=True))
    for n in range(MAX_ATTEMPTS):  # each worker claims the file and dies
        assert claim_when_free(runtime, f"dying-{n}").id == file_id
    survivor = claim_when_free(runtime, "survivor")
    assert survivor.attempts == MAX_ATTEMPTS + 1

    runtime.delivery.process_file(survivor, worker="survivor")

    file = stored(runtime, file_id)
    assert (file.status, file.rows) == ("failed", None)
    assert file.error is not None
    assert f"gave up after {MAX_ATTEMPTS} attempts" in file.error
    assert failed_events(runtime, file) == 1
    assert runtime.delivery.claim_file(worker="later") is None  # never claimed again


def test_a_retry_claimed_past_the_deadline_names_the_last_attempts_error(
    late_runtime: Runtime,
) -> None:
    runtime = late_runtime
    file_id = queue_file(runtime, make_tenant(runtime.engine, ingestion=True))
    claim_when_free(runtime, "first")  # its attempt failed, a retry due at once
    with runtime.engine.begin() as conn:
        now = utc_now()
        files.schedule_retry(
            conn, file_id, error="HTTP 503 from the bank", next_attempt_at=now, now=now
        )
    claimed = claim_when_free(runtime, "late")
    runtime.delivery.process_file(claimed, worker="late")
    file = stored(runtime, file_id)
    assert file.status == "failed"
    assert file.error == (
        "not delivered within the delivery deadline; the last attempt: HTTP 503 from the bank"
    )
    assert file.attempts == 1  # the claim that found the deadline passed tried nothing
    assert failed_events(runtime, file) == 1


def test_a_file_past_its_deadline_fails_at_its_claim(late_runtime: Runtime) -> None:
    runtime = late_runtime
    file_id = queue_file(runtime, make_tenant(runtime.engine, ingestion=True))
    claimed = claim_when_free(runtime, "late")
    runtime.delivery.process_file(claimed, worker="late")
    file = stored(runtime, file_id)
    assert file.status == "failed"
    assert file.error == "not delivered within the delivery deadline"
    assert file.attempts == 0  # no attempt was made
    assert failed_events(runtime, file) == 1


def test_a_crash_after_delivery_leaves_the_file_delivered(short_runtime: Runtime) -> None:
    """What fails after the file's outcome committed (its rows' JSON text, its indexes)
    is the resource's to finish later: the file is never queued again, nor loaded twice."""
    runtime = short_runtime
    file_id = queue_file(runtime, make_tenant(runtime.engine, ingestion=True))
    claimed = claim_when_free(runtime, "worker")
    runtime.delivery.process_file(claimed, worker="worker")

    runtime.delivery.fail_crashed(claimed, RuntimeError("indexing failed"), worker="worker")

    file = stored(runtime, file_id)
    assert (file.status, file.rows, file.error) == ("delivered", 3, None)
    assert failed_events(runtime, file) == 0
    assert runtime.delivery.claim_file(worker="later") is None


def test_the_sweep_removes_only_leftovers_of_files_that_ended_or_are_gone(
    short_runtime: Runtime,
) -> None:
    """What a worker's start sweeps (tests/e2e/test_staging_leftovers.py kills real
    workers): an active file's staging file may be its live attempt's, and a staging
    file of `tally admin load` belongs to no file; both stay."""
    runtime = short_runtime
    active = queue_file(runtime, make_tenant(runtime.engine))
    ended = queue_file(runtime, make_tenant(runtime.engine))
    with runtime.engine.begin() as conn:
        files.finish(conn, ended, status=FileStatus.FAILED, now=utc_now(), error="ended")
        conn.exec_driver_sql("CREATE TABLE r_1_f999999 (x INTEGER)")  # a file since deleted
    folder = BlobStore(runtime.settings.blob_dir).staging_dir
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"file-{active}-0a.db", f"file-{ended}-0b.db", "file-999999-0c.db", "load-0d.db"]
    for name in names:
        (folder / name).write_bytes(b"")

    assert runtime.delivery.sweep_leftovers() == 3
    assert sorted(p.name for p in folder.iterdir()) == [names[0], names[3]]
    with runtime.engine.connect() as conn:
        assert not sa.inspect(conn).has_table("r_1_f999999")
    assert runtime.delivery.sweep_leftovers() == 0
