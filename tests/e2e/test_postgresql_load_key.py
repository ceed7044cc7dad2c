"""A new source's load on PostgreSQL commits its rows without the row ids' primary key,
which a worker adds afterwards (issue #36), with real `tally` processes: no reader ever
sees the table before it holds every row, and a load killed before its commit leaves
nothing (tests/e2e/test_staging_leftovers.py kills one mid-load on both backends).
What a load leaves after its commit is what a killed one leaves at that point: nothing
of the load runs after it."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import sqlalchemy as sa

from support.databases import BACKENDS, make_settings, other_sessions, primary_key
from support.factories import make_tenant
from support.hostile import ledger_csv
from support.processes import Processes, TallyProcess, process_defaults
from support.waiting import eventually
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage import resources
from tally.storage.resources import table_name_for

pytestmark = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "postgresql"])

ROWS = 300_000
WAIT_SECONDS = 90.0


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(request, backend, tmp_path / "home", **process_defaults())


def admin_load(
    runtime: Runtime, processes: Processes, csv: Path, name: str
) -> tuple[int, TallyProcess]:
    """`tally admin load` of a ROWS-row ledger into a new workspace's source `name`, as a
    process; and the workspace."""
    csv.write_bytes(ledger_csv(ROWS))
    workspace_id = make_tenant(runtime.engine).workspace_id
    load = processes.admin(
        runtime.settings, "load", "--workspace", str(workspace_id), "--name", name, str(csv)
    )
    return workspace_id, load


def visible_rows(runtime: Runtime, workspace_id: int, name: str) -> int | None:
    """The rows another session sees in the source `name`: None while no source of that
    name is committed."""
    with runtime.engine.connect() as conn:
        found = conn.exec_driver_sql(
            "SELECT id FROM resources WHERE workspace_id = %(w)s AND name = %(n)s",
            {"w": workspace_id, "n": name},
        ).scalar()
        if found is None:
            return None
        table = table_name_for(found)
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())


def test_the_rows_are_seen_whole_and_a_worker_adds_their_key(
    runtime: Runtime, processes: Processes, tmp_path: Path
) -> None:
    workspace_id, load = admin_load(runtime, processes, tmp_path / "ledger.csv", "l")
    seen: set[int | None] = set()
    while load.alive:
        seen.add(visible_rows(runtime, workspace_id, "l"))
    assert load.popen.wait(WAIT_SECONDS) == 0, load.describe()
    assert seen <= {None, ROWS}, seen  # never part of the file
    loaded = json.loads(load.stdout_path.read_text())
    with runtime.engine.connect() as conn:
        resource = resources.get_resource(conn, loaded["id"])
    assert visible_rows(runtime, workspace_id, "l") == ROWS
    assert primary_key(runtime.engine, resource.table_name) is None  # left to the workers

    worker = processes.worker(runtime.settings, concurrency=1)

    def finished() -> bool:
        with runtime.engine.connect() as conn:
            return resources.get_resource(conn, resource.id).indexed_version > 0

    eventually(finished, timeout=WAIT_SECONDS, what="the worker to finish", explain=worker.describe)
    assert primary_key(runtime.engine, resource.table_name) == f"{resource.table_name}_pkey"
    assert "resource_keyed" in worker.stderr_text()
    with runtime.engine.connect() as conn:
        ids = sa.text(
            f"SELECT count(DISTINCT _row_id), min(_row_id), max(_row_id) FROM {resource.table_name}"
        )
        assert tuple(conn.execute(ids).one()) == (ROWS, 1, ROWS)
    assert worker.terminate(timeout=20) == 0


def test_a_load_killed_before_its_commit_leaves_nothing(
    runtime: Runtime, processes: Processes, tmp_path: Path
) -> None:
    """SIGKILLed while its COPY runs: no source, no table, nothing for a worker to key."""
    with runtime.engine.connect() as conn:
        before = set(sa.inspect(conn).get_table_names())
    workspace_id, load = admin_load(runtime, processes, tmp_path / "ledger.csv", "k")

    def copying() -> bool:
        return other_sessions(runtime.engine, "state = 'active' AND query LIKE 'COPY %%'") > 0

    eventually(
        copying, timeout=WAIT_SECONDS, what="the load's COPY", interval=0.01, explain=load.describe
    )
    assert load.kill() == -signal.SIGKILL
    assert visible_rows(runtime, workspace_id, "k") is None
    with runtime.engine.connect() as conn:
        assert set(sa.inspect(conn).get_table_names()) == before
