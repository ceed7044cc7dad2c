"""Reconciliations run by real worker processes, on SQLite and PostgreSQL: `tally serve`
re-runs one by itself after deliveries to either side (once per burst) and serves its
output through /api/v1; a worker SIGKILLed mid-run leaves the published output whole
and another worker finishes the run (GET shows it `stalled` until then, and it starts
over); two workers never run the same reconciliation at once (decision 0016).

Each test gets its own database and starts its own `tally` subprocesses (all stopped at
the end); leases are short so a killed worker's run is taken up quickly.
"""

from __future__ import annotations

import datetime as dt
import signal
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.derived_runs import STARTED, WAIT_SECONDS, feed, idle_after
from support.factories import Tenant, make_source, make_tenant
from support.processes import (
    Processes,
    process_defaults,
    read_rows,
    total_count,
    wait_for_final_files,
)
from support.reconciliation_runs import (
    BANK_CSV,
    LEDGER_CSV,
    definition_json,
    derived,
    make_reconciliation,
    output_resource,
)
from support.waiting import eventually
from tally.core.clock import utc_now
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage import reconciliation_keys
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import write_connection

LEASE_SECONDS = 2.0
BURST_SECONDS = 4.0  # long enough for three small files to be delivered in one burst


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        **process_defaults(lease_seconds=LEASE_SECONDS, derived_burst_seconds=BURST_SECONDS),
    )


def create_source(client: httpx.Client, tenant: Tenant, name: str) -> int:
    response = client.post("/api/v2/sources", json={"name": name}, headers=tenant.v2_headers)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def test_serve_reruns_a_reconciliation_after_deliveries_once_per_burst(
    settings: Settings, runtime: Runtime, processes: Processes
) -> None:
    serve = processes.serve(settings, serve_worker=True)
    tenant = make_tenant(runtime.engine, ingestion=True)
    serve.wait_ready()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        bank, ledger = (
            create_source(client, tenant, "bank"),
            create_source(client, tenant, "ledger"),
        )
        feed(client, tenant, bank, BANK_CSV)
        feed(client, tenant, ledger, LEDGER_CSV)
        for source in (bank, ledger):
            wait_for_final_files(client, tenant, source, count=1, timeout=WAIT_SECONDS)
        record = make_reconciliation(runtime.engine, tenant, definition_json(bank, ledger))
        first = idle_after(runtime, record.id, 1, [serve])
        version = output_resource(runtime, record).data_version

        rows, total = read_rows(client, tenant, record.resource_id, **{"bank.amount__gte": "100"})
        assert (total, rows[0]["bank.amount"], rows[0]["status"]) == (
            1,
            Decimal("100.00"),
            "matched",
        )
        assert total_count(client, tenant, record.resource_id, status="unmatched") == 2
        rows, _ = read_rows(client, tenant, record.resource_id, ordering="-difference")
        assert rows[0]["difference"] == Decimal("0.00")

        for n in range(3):  # a burst of deliveries to the left side
            feed(
                client, tenant, bank, f"reference,amount,txn_date,memo\nNEW-{n},1.00,2024-03-01,x\n"
            )
        wait_for_final_files(client, tenant, bank, count=4, timeout=WAIT_SECONDS)
        second = idle_after(runtime, record.id, 2, [serve])
        assert second.last_run["counts"]["unmatched_left"] == 4
        assert output_resource(runtime, record).data_version == version + 1

        feed(client, tenant, ledger, "reference,amount,txn_date,account\nNEW-0,1.00,2024-03-01,1\n")
        third = idle_after(runtime, record.id, 3, [serve])
        assert third.last_run["counts"]["unmatched_left"] == 3
        assert total_count(client, tenant, record.resource_id, status="unmatched") == 4
    assert serve.stderr_text().count(STARTED) == 3  # one run per burst
    assert first.last_run is not None
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)


def big_pair(rows: int) -> tuple[str, str]:
    """Every bank row has a ledger twin; the ledger also has rows of its own."""
    bank = ["reference,amount,txn_date"]
    ledger = ["reference,amount,txn_date"]
    for i in range(rows):
        line = f"REF-{i:07d},{i % 5000}.{i % 100:02d},2024-{i % 12 + 1:02d}-{i % 28 + 1:02d}"
        bank.append(line)
        ledger.append(line)
    ledger += [f"ONLY-{i},1.00,2024-01-01" for i in range(rows // 10)]
    return "\n".join(bank) + "\n", "\n".join(ledger) + "\n"


def big_reconciliation(runtime: Runtime, tenant: Tenant, rows: int) -> DerivedRecord:
    bank_csv, ledger_csv = big_pair(rows)
    bank = make_source(runtime.engine, tenant, bank_csv, name="bank")
    ledger = make_source(runtime.engine, tenant, ledger_csv, name="ledger")
    passes = [
        {
            "name": "same",
            "type": "one_to_one",
            "keys": [{"left": "reference", "right": "reference"}],
        }
    ]
    return make_reconciliation(
        runtime.engine, tenant, definition_json(bank.id, ledger.id, passes=passes)
    )


def staged(runtime: Runtime, record: DerivedRecord) -> bool:
    """Whether the run has begun writing its output beside the published one (the key
    table a finished full run leaves for the next run is not staged)."""
    with runtime.engine.connect() as conn:
        names = conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            if runtime.backend_name == "sqlite"
            else "SELECT tablename FROM pg_tables"
        ).scalars()
        kept = reconciliation_keys.keys_table(record.resource_id)
        return any(name.startswith(f"r_{record.resource_id}_") and name != kept for name in names)


def stalled_run(api: httpx.Client, tenant: Tenant, path: str) -> Any:
    """GET's `run` once it says `stalled` (the lease of its dead worker expired)."""
    run = api.get(path, headers=tenant.v2_headers).json()["run"]
    return run if run is not None and run["phase"] == "stalled" else None


def test_a_worker_killed_mid_run_leaves_the_output_whole_and_another_finishes(
    settings: Settings, runtime: Runtime, api: httpx.Client, processes: Processes
) -> None:
    rows = 150_000
    tenant = make_tenant(runtime.engine)
    record = big_reconciliation(runtime, tenant, rows)
    first = processes.worker(settings, concurrency=1)
    eventually(
        lambda: staged(runtime, record),
        timeout=WAIT_SECONDS,
        what="the run to start writing",
        interval=0.02,
        explain=first.describe,
    )
    assert first.kill() == -signal.SIGKILL

    killed = derived(runtime, record.id)
    assert killed.state == "running"  # its lease left to expire
    assert killed.run_phase == "writing"  # where it died; GET says so until the lease expires
    path = f"/api/v2/reconciliations/{record.id}"
    stalled = eventually(
        lambda: stalled_run(api, tenant, path), timeout=WAIT_SECONDS, what="GET to say stalled"
    )
    assert stalled["started_at"] == killed.run_started_at.isoformat()  # type: ignore[union-attr]
    assert output_resource(runtime, record).row_count == 0  # the published output: whole
    assert total_count(api, tenant, record.resource_id) == 0
    second = processes.worker(settings, concurrency=1)
    done = idle_after(runtime, record.id, 1, [second])

    assert done.attempts == 0
    assert done.error is None
    assert api.get(path, headers=tenant.v2_headers).json()["run"] is None
    started_over = dt.datetime.fromisoformat(done.last_run["started_at"])
    assert started_over > dt.datetime.fromisoformat(stalled["started_at"])
    assert "indexing" in done.last_run["phases"]
    expected = rows + rows // 10
    assert output_resource(runtime, record).row_count == expected
    assert total_count(api, tenant, record.resource_id) == expected
    assert total_count(api, tenant, record.resource_id, status="matched") == rows
    assert total_count(api, tenant, record.resource_id, status="unmatched") == rows // 10
    assert not staged(runtime, record)  # nothing left beside it


def test_two_workers_never_run_the_same_reconciliation_at_once(
    settings: Settings, runtime: Runtime, processes: Processes
) -> None:
    tenant = make_tenant(runtime.engine)
    record = big_reconciliation(runtime, tenant, 30_000)
    workers = [processes.worker(settings, concurrency=2), processes.worker(settings, concurrency=2)]
    for runs in (1, 2, 3):
        if runs > 1:
            with write_connection(runtime.engine) as conn, conn.begin():
                derived_records.request_run(conn, record.id, utc_now())
        idle_after(runtime, record.id, runs, workers)
    started = [w.stderr_text().count(STARTED) for w in workers]
    assert sum(started) == 3, started  # one run per wish, never two at once
    for worker in workers:
        assert worker.terminate(timeout=30) == 0
        assert "Traceback" not in worker.stderr_text(), worker.describe()
