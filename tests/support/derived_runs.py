"""Runs of derived resources (reconciliations, transformations) as their tests drive
them: in-process, settings with quick bursts and retries and a worker thread; with real
`tally` processes, a delivery fed through /api/v2 and waiting for the derived resource
to be idle after a given number of runs started in the workers' logs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.factories import Tenant
from support.processes import TallyProcess
from support.reconciliation_runs import derived
from support.waiting import eventually
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage.derived.records import DerivedRecord
from tally.storage.resource_tables.row_json import store_row_json
from tally.storage.resources import Resource
from tally.worker.runner import Worker

WAIT_SECONDS = 120.0
STARTED = "derived_run_started"  # the workers' log event of a run begun


def quick_settings(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path, *, max_attempts: int
) -> Settings:
    """In-process runs: short bursts, retries and leases, no response cache."""
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        response_cache=False,
        derived_burst_seconds=0.2,
        derived_max_attempts=max_attempts,
        retry_base_seconds=0.05,
        retry_max_seconds=0.1,
        lease_seconds=3.0,
    )


@contextmanager
def started_worker(runtime: Runtime) -> Iterator[Worker]:
    """A worker polling often, stopped at the end."""
    running = Worker(runtime, concurrency=2, poll_seconds=0.05)
    try:
        yield running
    finally:
        running.stop()


def feed(client: httpx.Client, tenant: Tenant, source_id: int, csv: str) -> None:
    """One CSV delivery to the source, accepted."""
    response = client.post(
        f"/api/v2/sources/{source_id}/feed-source",
        headers={**tenant.v2_headers, "content-type": "text/csv"},
        content=csv.encode(),
    )
    assert response.status_code == 202, response.text


def idle_after(runtime: Runtime, derived_id: int, runs: int, workers: list[TallyProcess]) -> Any:
    """The derived resource once `runs` runs have started in `workers` and it is idle."""
    kind = derived(runtime, derived_id).kind

    def done() -> DerivedRecord | None:
        current = derived(runtime, derived_id)
        started = sum(w.stderr_text().count(STARTED) for w in workers)
        return current if started >= runs and current.state == "idle" else None

    return eventually(
        done,
        timeout=WAIT_SECONDS,
        what=f"run {runs} of the {kind}",
        explain=lambda: "\n".join(w.describe() for w in workers),
    )


def renders_as_stored_text(
    runtime: Runtime, output: Resource, read: Callable[[], list[bytes]]
) -> list[bytes]:
    """A derived output keeps no row JSON text (storage/derived/outputs.py): check that
    none of its rows has any, then that `read` (its pages) answers byte for byte what it
    answers once every row has the text a source would store for it; the text is
    cleared again after. Returns the pages."""
    with runtime.engine.connect() as conn:
        kept = f"SELECT count(*) FROM {output.table_name} WHERE _json IS NOT NULL"
        assert conn.exec_driver_sql(kept).scalar_one() == 0
    rendered = read()
    stored = store_row_json(runtime.engine, output.table_name, output.columns)
    assert stored == output.row_count
    try:
        assert read() == rendered
    finally:
        with runtime.engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE {output.table_name} SET _json = NULL")
    return rendered
