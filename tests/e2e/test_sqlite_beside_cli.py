"""`tally serve` on SQLite while other tally processes open the database and leave, as
README's Operate section has operators do: `tally admin` commands, a `tally worker`
started and stopped. Then SIGKILL: every write the service acknowledged is there.

Issue #30: a process that closed any descriptor of the database file lost every POSIX
lock its connections held on it (storage/home.py opened the file when a second engine
was made, and `tally serve` makes two). The next process to close its last connection
then took the database for unused, checkpointed it and deleted the write-ahead log the
service went on writing to: its acknowledged writes were invisible to every other
process and gone after a crash. No test saw it because every end-to-end test held the
database open from the test process for the whole test (its `runtime`), so no other
process ever closed the last connection while `tally serve` ran; and none killed the
service and looked for its writes afterwards. This one holds no connection of its own
while the service runs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.factories import Tenant
from support.processes import Processes, ServeProcess, process_defaults, register_webhook
from support.sqlite_lock import posix_locks
from tally.settings import Settings


@pytest.fixture
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    return make_settings(request, "sqlite", tmp_path / "home", **process_defaults())


def admin(processes: Processes, settings: Settings, *args: str) -> Any:
    """Run `tally admin ARGS...` to its end; its JSON answer."""
    process = processes.admin(settings, *args)
    assert process.popen.wait(60) == 0, process.describe()
    return json.loads(process.stdout_path.read_text())


def deleted_files_open_in(pid: int) -> list[str]:
    return [
        os.readlink(fd)
        for fd in Path(f"/proc/{pid}/fd").iterdir()
        if os.path.exists(fd) and os.readlink(fd).endswith(" (deleted)")
    ]


def assert_service_owns_its_database(serve: ServeProcess, settings: Settings) -> None:
    """The service still holds its connections' lock on the database (SQLite's shared
    lock, which tells every other process the database is in use), and the log it
    writes to is the one on disk."""
    assert posix_locks(serve.pid, settings.sqlite_path), Path("/proc/locks").read_text()
    assert deleted_files_open_in(serve.pid) == []


@pytest.fixture
def tenant(processes: Processes, settings: Settings) -> Tenant:
    """An account, workspace and key made as an operator makes them: with the CLI."""
    account = admin(processes, settings, "create-account", "--name", "acme")
    workspace = admin(
        processes,
        settings,
        "create-workspace",
        "--account",
        str(account["id"]),
        "--name",
        "ops",
        "--ingestion",
    )
    key = admin(processes, settings, "create-key", "--workspace", str(workspace["id"]))
    return Tenant(account["id"], workspace["id"], key["key"])


def test_every_write_acknowledged_beside_cli_commands_and_a_worker_survives_sigkill(
    processes: Processes, settings: Settings, tenant: Tenant, tmp_path: Path
) -> None:
    serve = processes.serve(settings, serve_worker=True)
    serve.wait_ready()
    assert_service_owns_its_database(serve, settings)
    acknowledged: list[int] = []  # source ids the service answered 201 for
    keys = [tenant]

    def create_source(client: httpx.Client, credentials: Tenant) -> None:
        created = register_webhook(client, credentials, f"source {len(acknowledged)}")
        assert created["id"] not in acknowledged
        acknowledged.append(created["id"])

    with httpx.Client(base_url=serve.url, timeout=30) as client:
        create_source(client, tenant)

        # A read-only command: it opens the database and closes its last connection.
        admin(processes, settings, "list-keys", "--workspace", str(tenant.workspace_id))
        assert_service_owns_its_database(serve, settings)
        create_source(client, tenant)

        # A key the CLI made is one the service sees at once (it answered 403).
        new_key = admin(processes, settings, "create-key", "--workspace", str(tenant.workspace_id))
        keys.append(Tenant(tenant.account_id, tenant.workspace_id, new_key["key"]))
        assert_service_owns_its_database(serve, settings)
        create_source(client, keys[-1])

        # A second worker process starts and stops beside the service.
        worker = processes.worker(settings)
        worker.wait_ready()
        create_source(client, tenant)
        assert worker.terminate(timeout=30) == 0
        assert_service_owns_its_database(serve, settings)
        create_source(client, tenant)

        # A CLI load takes an id; the service's next write never reuses it.
        csv = tmp_path / "ledger.csv"
        csv.write_text("id,amount\n1,10.00\n2,20.50\n")
        loaded = admin(
            processes,
            settings,
            "load",
            "--workspace",
            str(tenant.workspace_id),
            "--name",
            "loaded",
            str(csv),
        )
        acknowledged.append(loaded["id"])
        assert_service_owns_its_database(serve, settings)
        create_source(client, tenant)

    assert serve.kill() == -9

    restarted = processes.serve(settings)
    restarted.wait_ready()
    with httpx.Client(base_url=restarted.url, timeout=30) as client:
        for credentials in keys:
            listed = client.get(
                f"/api/v2/sources/{acknowledged[0]}/files", headers=credentials.v2_headers
            )
            assert listed.status_code == 200, listed.text
        for source_id in acknowledged:
            response = client.get(f"/api/v2/sources/{source_id}/files", headers=tenant.v2_headers)
            assert response.status_code == 200, (source_id, response.text)
