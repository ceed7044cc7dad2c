"""What a SIGKILLed load leaves behind is removed once its file has ended (issue #14),
on SQLite and PostgreSQL, with real `tally worker` processes.

On SQLite a load is staged in a database file of its own, and a source's first file
fills a table that is renamed into place when published (decision 0013): a worker
killed meanwhile leaves both. Every way the file then ends removes them, and a worker
sweeps at its start the leftovers of files that ended without it. `tally admin load`
stages the same way with no file record: a worker's start removes what a killed one left,
and nothing of one still running. On PostgreSQL the load is one transaction, which the
killed connection rolls back: the same checks hold there, with nothing to remove.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from support.databases import make_settings, other_sessions
from support.factories import make_tenant
from support.hostile import ledger_csv
from support.processes import (
    Processes,
    TallyProcess,
    list_files,
    notify,
    process_defaults,
    register_webhook,
)
from support.servers import file_server_app, serve_app
from support.waiting import eventually
from tally.core.files import FileStatus
from tally.runtime import Runtime
from tally.services.loader.load import PARALLEL_CHECK_MIN_BYTES
from tally.settings import Settings
from tally.storage import files
from tally.storage.blobs import BlobStore

LEASE_SECONDS = 2.0
WAIT_SECONDS = 90.0
ROWS = 300_000  # staged for seconds, its table filled for about one
FILES: dict[str, bytes] = {}


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        **process_defaults(lease_seconds=LEASE_SECONDS, delivery_max_attempts=1),
    )


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_app(file_server_app(FILES)) as url:
        yield url


def staging_files(settings: Settings) -> list[str]:
    folder = BlobStore(settings.blob_dir).staging_dir
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def table_names(runtime: Runtime) -> set[str]:
    with runtime.engine.connect() as conn:
        return set(sa.inspect(conn).get_table_names())


def killed_mid_load(
    runtime: Runtime, api: httpx.Client, processes: Processes, server: str
) -> tuple[int, set[str]]:
    """A new source's first file, its worker SIGKILLed mid-load (on SQLite, while the
    file's table is being filled): the file, and the database's tables before."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    hook = register_webhook(api, tenant, "killed")
    before = table_names(runtime)
    name = f"big-{id(runtime)}.csv"
    FILES[name] = ledger_csv(ROWS)
    worker = processes.worker(runtime.settings, concurrency=1)
    assert notify(api, hook["webhook_id"], f"{server}/files/{name}").is_success
    [listed] = eventually(lambda: list_files(api, tenant, hook["id"]), timeout=10, what="file")
    file_id = int(listed["id"])
    if runtime.backend_name == "sqlite":
        filling = f"r_{hook['id']}_f{file_id}"
        eventually(
            lambda: filling in table_names(runtime),
            timeout=WAIT_SECONDS,
            what="the file's table to be filled",
            interval=0.01,
            explain=worker.describe,
        )
    else:
        eventually(
            lambda: file_status(runtime, file_id) == FileStatus.LOADING,
            timeout=WAIT_SECONDS,
            what="the load to start",
            interval=0.01,
            explain=worker.describe,
        )
    assert worker.kill() == -signal.SIGKILL
    assert file_status(runtime, file_id) == FileStatus.LOADING  # killed mid-load
    if runtime.backend_name == "sqlite":  # what the kill left
        assert len(staging_files(runtime.settings)) == 1
        assert table_names(runtime) - before == {f"r_{hook['id']}_f{file_id}"}
    return file_id, before


def file_status(runtime: Runtime, file_id: int) -> str:
    with runtime.engine.connect() as conn:
        return files.get_file(conn, file_id).status


def assert_nothing_left(runtime: Runtime, before: set[str], worker: TallyProcess) -> None:
    eventually(
        lambda: staging_files(runtime.settings) == [] and table_names(runtime) == before,
        timeout=10,
        what="no staging file and no table left",
        explain=lambda: f"{staging_files(runtime.settings)} {table_names(runtime) - before}",
    )
    removed = worker.stderr_text().count("staging_leftover_removed")
    assert removed == (2 if runtime.backend_name == "sqlite" else 0), worker.describe()


def test_a_file_killed_on_its_last_attempt_leaves_nothing_once_it_fails(
    runtime: Runtime, api: httpx.Client, processes: Processes, server: str
) -> None:
    """One attempt allowed: the next worker fails the file at its claim, and removes
    the killed attempt's staging file and half-filled table as it does."""
    file_id, before = killed_mid_load(runtime, api, processes, server)
    second = processes.worker(runtime.settings, concurrency=1)
    eventually(
        lambda: file_status(runtime, file_id) == FileStatus.FAILED,
        timeout=WAIT_SECONDS,
        what="the file to fail",
        explain=second.describe,
    )
    with runtime.engine.connect() as conn:
        failed = files.get_file(conn, file_id)
    assert (failed.attempts, failed.rows) == (2, None)
    assert "gave up after 1 attempts" in (failed.error or ""), failed.error
    assert_nothing_left(runtime, before, second)
    assert second.terminate(timeout=20) == 0


def test_a_worker_sweeps_at_start_the_leftovers_of_files_that_ended(
    runtime: Runtime, api: httpx.Client, processes: Processes, server: str
) -> None:
    """A file that ended without a worker seeing it (here: failed in the database by
    hand): the next worker to start removes what its killed attempt left."""
    file_id, before = killed_mid_load(runtime, api, processes, server)
    with runtime.engine.begin() as conn:
        now = dt.datetime.now(dt.UTC)
        files.finish(conn, file_id, status=FileStatus.FAILED, now=now, error="ended by hand")
    started = processes.worker(runtime.settings, concurrency=1)
    started.wait_ready()
    assert_nothing_left(runtime, before, started)
    assert file_status(runtime, file_id) == FileStatus.FAILED
    assert started.terminate(timeout=20) == 0


def test_a_delivered_file_leaves_no_staging_file_of_a_killed_attempt(
    runtime: Runtime, api: httpx.Client, processes: Processes, server: str
) -> None:
    """With attempts left, the next attempt delivers the file, and removes the staging
    file the killed one left (the half-filled table it replaced and dropped itself)."""
    file_id, before = killed_mid_load(runtime, api, processes, server)
    second = processes.worker(runtime.settings, concurrency=1, delivery_max_attempts=3)
    eventually(
        lambda: file_status(runtime, file_id) == FileStatus.DELIVERED,
        timeout=WAIT_SECONDS,
        what="the file to be delivered",
        explain=second.describe,
    )
    eventually(
        lambda: staging_files(runtime.settings) == [],
        timeout=10,
        what="no staging file left",
        explain=lambda: str(staging_files(runtime.settings)),
    )
    assert table_names(runtime) == before
    expected = 1 if runtime.backend_name == "sqlite" else 0
    # the file is removed before the line saying so is written: wait for the line
    eventually(
        lambda: second.stderr_text().count("staging_leftover_removed") >= expected,
        timeout=10,
        what="the removal to be logged",
        explain=second.stderr_text,
    )
    assert second.terminate(timeout=20) == 0
    assert second.stderr_text().count("staging_leftover_removed") == expected


def admin_load(runtime: Runtime, processes: Processes, csv: Path) -> TallyProcess:
    """`tally admin load` of `csv` into a new source of a new workspace, as a process."""
    tenant = make_tenant(runtime.engine)
    workspace = str(tenant.workspace_id)
    return processes.admin(
        runtime.settings, "load", "--workspace", workspace, "--name", csv.stem, str(csv)
    )


def command_scratch(runtime: Runtime, before: set[str]) -> tuple[list[str], set[str]]:
    """A `tally admin load`'s staging and lock files, and its table in the main database."""
    named = [n for n in staging_files(runtime.settings) if "load-" in n]
    return named, {t for t in table_names(runtime) - before if t.startswith("staged_")}


def loading(runtime: Runtime, load: TallyProcess, before: set[str]) -> None:
    """Wait until the load fills its table (SQLite) or is well under way (PostgreSQL)."""
    if runtime.backend_name == "sqlite":
        eventually(
            lambda: len(command_scratch(runtime, before)[1]) == 1,
            timeout=WAIT_SECONDS,
            what="the load's table to be filled",
            interval=0.01,
            explain=load.describe,
        )
    else:  # its one transaction has written (a transaction id is given at its first write)
        eventually(
            lambda: writing_transactions(runtime) == 1,
            timeout=WAIT_SECONDS,
            what="the load's transaction to write",
            interval=0.01,
            explain=load.describe,
        )


def writing_transactions(runtime: Runtime) -> int:
    return other_sessions(runtime.engine, "backend_xid IS NOT NULL")


def large_csv() -> bytes:
    """A file past PARALLEL_CHECK_MIN_BYTES in few rows (a long memo each): staged as its
    text beside the process that checks it, converted as its table is filled."""
    memo = "x" * 560
    rows = [f"{n},{n % 1000}.{n % 100:02d},{memo}" for n in range(1, 61_000)]
    content = ("id,amount,memo\n" + "\n".join(rows) + "\n").encode()
    assert len(content) >= PARALLEL_CHECK_MIN_BYTES
    return content


@pytest.mark.parametrize("content", [lambda: ledger_csv(ROWS), large_csv], ids=["small", "large"])
def test_a_worker_sweeps_at_start_what_a_killed_admin_load_left(
    runtime: Runtime, processes: Processes, tmp_path: Path, content: Callable[[], bytes]
) -> None:
    """No file record tells a killed `tally admin load` from a running one: its lock
    file does. Killed while it fills its table, it leaves its staging file, lock file
    and table (SQLite); the next worker to start removes all three. A small file's
    rows are converted in staging; a large one's as they are copied out."""
    csv = tmp_path / "killed.csv"
    csv.write_bytes(content())
    before = table_names(runtime)
    load = admin_load(runtime, processes, csv)
    loading(runtime, load, before)
    assert load.kill() == -signal.SIGKILL
    names, tables = command_scratch(runtime, before)
    if runtime.backend_name == "sqlite":  # what the kill left
        assert sorted(n.rsplit(".", 1)[1] for n in names) == ["db", "lock"], names
        assert len(tables) == 1
    else:
        assert (names, tables) == ([], set())
    worker = processes.worker(runtime.settings, concurrency=1)
    worker.wait_ready()
    eventually(
        lambda: command_scratch(runtime, before) == ([], set()),
        timeout=10,
        what="no staging file, lock file or table left",
        explain=lambda: str(command_scratch(runtime, before)),
    )
    removed = worker.stderr_text().count("staging_leftover_removed")
    assert removed == (3 if runtime.backend_name == "sqlite" else 0), worker.describe()
    assert table_names(runtime) == before
    assert worker.terminate(timeout=20) == 0


def test_a_sweep_leaves_a_running_admin_load_alone(
    runtime: Runtime, processes: Processes, tmp_path: Path
) -> None:
    """The sweep a worker runs at its start, run while `tally admin load` stages its file
    and again while it fills its table, removes nothing of it (either removal would
    fail the load): the load then publishes every row, and leaves nothing behind."""
    csv = tmp_path / "running.csv"
    csv.write_bytes(ledger_csv(ROWS))
    before = table_names(runtime)
    load = admin_load(runtime, processes, csv)
    if runtime.backend_name == "sqlite":
        eventually(
            lambda: any(n.endswith(".db") for n in command_scratch(runtime, before)[0]),
            timeout=WAIT_SECONDS,
            what="the load's staging file",
            interval=0.01,
            explain=load.describe,
        )
        staged = command_scratch(runtime, before)
        assert runtime.delivery.sweep_leftovers() == 0
        assert command_scratch(runtime, before)[0] == staged[0]
    loading(runtime, load, before)
    assert runtime.delivery.sweep_leftovers() == 0
    assert load.popen.wait(WAIT_SECONDS) == 0, load.describe()
    assert json.loads(load.stdout_path.read_text())["rows"] == ROWS
    assert command_scratch(runtime, before) == ([], set())
