"""Transformations refreshed by real worker processes, on SQLite and PostgreSQL: `tally
serve` refreshes one by itself after deliveries to its input (once per burst) and serves
its rows through /api/v1; a worker SIGKILLed mid-refresh leaves the published output
readable and another worker redoes the refresh (decision 0016)."""

from __future__ import annotations

import signal
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from support.databases import make_settings
from support.derived_runs import STARTED, WAIT_SECONDS, feed, idle_after
from support.factories import make_source, make_tenant, write_file
from support.processes import (
    Processes,
    process_defaults,
    read_rows,
    total_count,
    wait_for_final_files,
)
from support.reconciliation_runs import derived, output_resource
from tally.runtime import Runtime
from tally.settings import Settings

LEASE_SECONDS = 2.0
BURST_SECONDS = 3.0
SETTLEMENTS = "payout_id,amount,status\nPO-1,10.10,settled\nPO-2,5.005,void\n"


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        **process_defaults(lease_seconds=LEASE_SECONDS, derived_burst_seconds=BURST_SECONDS),
    )


def test_serve_refreshes_a_transformation_after_deliveries_once_per_burst(
    settings: Settings, runtime: Runtime, processes: Processes
) -> None:
    serve = processes.serve(settings, serve_worker=True)
    tenant = make_tenant(runtime.engine, ingestion=True)
    serve.wait_ready()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        source = client.post("/api/v2/sources", json={"name": "s"}, headers=tenant.v2_headers)
        assert source.status_code == 201, source.text
        source_id = int(source.json()["id"])
        feed(client, tenant, source_id, SETTLEMENTS)
        wait_for_final_files(client, tenant, source_id, count=1, timeout=WAIT_SECONDS)
        body = {
            "name": "settled",
            "inputs": {"s": source_id},
            "sql": "SELECT s.payout_id, s.amount * 3 AS triple FROM s WHERE s.status = 'settled'",
        }
        created = client.post("/api/v2/transformations", json=body, headers=tenant.v2_headers)
        assert created.status_code == 201, created.text
        derived_id, output = created.json()["id"], created.json()["resource_id"]
        idle_after(runtime, derived_id, 1, [serve])
        rows, total = read_rows(client, tenant, output)
        assert (total, rows) == (1, [{"payout_id": "PO-1", "triple": Decimal("30.30")}])
        version = output_resource(runtime, derived(runtime, derived_id)).data_version
        for n in range(3):  # a burst of deliveries
            feed(client, tenant, source_id, f"payout_id,amount,status\nNEW-{n},1.001,settled\n")
        wait_for_final_files(client, tenant, source_id, count=4, timeout=WAIT_SECONDS)
        second = idle_after(runtime, derived_id, 2, [serve])
        assert second.last_run["incremental"] is True
        assert total_count(client, tenant, output) == 4
        rows, _ = read_rows(client, tenant, output, ordering="-payout_id", payout_id__gte="NEW-2")
        assert rows == [{"payout_id": "PO-1", "triple": Decimal("30.300")},
                        {"payout_id": "NEW-2", "triple": Decimal("3.003")}]  # fmt: skip
        assert output_resource(runtime, second).data_version == version + 1
    assert serve.stderr_text().count(STARTED) == 2  # one refresh per burst
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)


def test_a_worker_killed_mid_refresh_leaves_the_output_readable_and_another_redoes_it(
    settings: Settings, runtime: Runtime, api: httpx.Client, processes: Processes
) -> None:
    rows = 200_000
    tenant = make_tenant(runtime.engine)
    lines = "".join(f"REF-{i:07d},{i % 5000}.{i % 100:02d}\n" for i in range(rows))
    source = make_source(runtime.engine, tenant, "reference,amount\n" + lines, name="big")
    body = {
        "name": "grouped",
        "inputs": {"s": source.id},
        "sql": "SELECT s.reference, SUM(s.amount) AS amount, COUNT(*) AS n FROM s "
        "GROUP BY s.reference ORDER BY s.reference DESC",
    }
    created = runtime.transformations.create(workspace_id=tenant.workspace_id, body=body)
    runtime.derived.run_now(created.id, kind="transformation", worker="test")
    assert total_count(api, tenant, created.resource_id) == rows
    path = write_file("reference,amount\nREF-NEW,1.00\n")
    try:
        runtime.catalogue.append_file(source.id, path)  # queues the refresh
    finally:
        path.unlink()
    first = processes.worker(settings, concurrency=1)
    first.wait_for_stderr(STARTED, timeout=WAIT_SECONDS)
    # At once: a 200,000-row GROUP BY takes a few tenths of a second to run and publish,
    # and the state below shows the kill came before the publish.
    assert first.kill() == -signal.SIGKILL

    killed = derived(runtime, created.id)
    assert killed.state == "running", first.describe()  # its lease left to expire
    assert total_count(api, tenant, created.resource_id) == rows  # the old output, whole
    second = processes.worker(settings, concurrency=1)
    done = idle_after(runtime, created.id, 1, [second])
    assert (done.attempts, done.error) == (0, None)
    assert total_count(api, tenant, created.resource_id) == rows + 1
    page = api.get(
        f"/api/v1/resources/{created.resource_id}/data",
        headers=tenant.headers,
        params={"reference": "REF-NEW"},
    )
    assert page.json()["data"] == [{"reference": "REF-NEW", "amount": 1.0, "n": 1}]
