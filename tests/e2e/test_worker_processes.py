"""Worker processes treated roughly, on SQLite and PostgreSQL: SIGKILL mid-download and
mid-load, SIGTERM mid-job (and with its stderr gone), two workers sharing one queue
under 200 concurrent notifications, and `tally serve` running its own worker.

Every test gets its own database and starts its own `tally` subprocesses (all stopped
at the end, whatever happens); files come from a real server on 127.0.0.1. Leases are
short (2 s) so a killed worker's file is taken up again quickly.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import column, distinct, func, select, table

from support.databases import make_settings
from support.factories import Tenant, make_source, make_tenant
from support.processes import (
    Processes,
    ServeProcess,
    TallyProcess,
    list_files,
    notify,
    process_defaults,
    process_env,
    read_rows,
    register_webhook,
    total_count,
    wait_for_final_files,
)
from support.servers import RequestLog, SeenRequest, file_server_app, serve_app
from support.waiting import eventually
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage import files, resources

LEASE_SECONDS = 2.0
WAIT_SECONDS = 90.0
FILES: dict[str, bytes] = {}
LOG = RequestLog()


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request, backend, tmp_path / "home", **process_defaults(lease_seconds=LEASE_SECONDS)
    )


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_app(file_server_app(FILES, log=LOG)) as url:
        yield url


def ledger(first_id: int, rows: int) -> bytes:
    lines = ["id,amount,currency,booked_on"]
    lines += [
        f"{i},{i % 1000}.{i % 100:02d},EUR,2024-01-{i % 28 + 1:02d}"
        for i in range(first_id, first_id + rows)
    ]
    return ("\n".join(lines) + "\n").encode()


def publish(name: str, content: bytes) -> str:
    FILES[name] = content
    return name


def requests_for(path: str) -> list[SeenRequest]:
    return [seen for seen in LOG.requests if seen.path == path]


def file_record(runtime: Runtime, file_id: int) -> files.FileRecord:
    """The file's row, straight from the database (status and lease)."""
    with runtime.engine.connect() as conn:
        return files.get_file(conn, file_id)


def distinct_ids(runtime: Runtime, source_id: int) -> int:
    """COUNT(DISTINCT id) in the source's table: duplicates cannot hide in a total."""
    with runtime.engine.connect() as conn:
        resource = resources.get_resource(conn, source_id)
        [physical] = [c.physical for c in resource.columns if c.name == "id"]
        stmt = select(func.count(distinct(column(physical)))).select_from(
            table(resource.table_name)
        )
        return int(conn.execute(stmt).scalar_one())


def wait_for_request(path: str, worker: TallyProcess) -> SeenRequest:
    """The first request for `path` (a worker has started downloading it)."""
    return eventually(
        lambda: next(iter(requests_for(path)), None),
        timeout=WAIT_SECONDS,
        what=f"a download of {path}",
        interval=0.02,
        explain=worker.describe,
    )


def register(api: httpx.Client, tenant: Tenant, name: str) -> tuple[int, str]:
    created = register_webhook(api, tenant, name)
    return created["id"], created["webhook_id"]


def only_file_id(api: httpx.Client, tenant: Tenant, source_id: int) -> int:
    [file] = list_files(api, tenant, source_id)
    return int(file["id"])


def thread_niceness(pid: int) -> dict[int, int]:
    """Each thread's niceness, from /proc (field 19 of a task's stat line)."""
    niceness = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        niceness[int(task.name)] = int(fields[16])
    return niceness


# --- CPU priority ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite"])
def test_worker_threads_run_nicer_than_serve(settings: Settings, processes: Processes) -> None:
    """TALLY_WORKER_NICENESS (default 10) is every thread of `tally worker`'s; `tally
    serve`, whose own worker shares the API's process, keeps the niceness it was given."""
    default = Settings.model_fields["worker_niceness"].default
    own = os.getpriority(os.PRIO_PROCESS, 0)
    worker = processes.worker(settings, worker_niceness=default)
    serve = processes.serve(settings, serve_worker=True, worker_niceness=default)
    worker.wait_ready()
    serve.wait_ready()

    worker_threads = thread_niceness(worker.pid)
    serve_threads = thread_niceness(serve.pid)

    assert len(worker_threads) > 2  # the job threads have started
    assert set(worker_threads.values()) == {max(default, own)}
    assert set(serve_threads.values()) == {own}
    assert f"nice {max(default, own)}" in worker.stderr_text()


# --- `tally serve` alone ------------------------------------------------------------------


def test_serve_delivers_with_its_own_worker(
    settings: Settings, runtime: Runtime, processes: Processes, server: str
) -> None:
    """TALLY_SERVE_WORKER (default true): `tally serve` is the whole service."""
    serve = processes.serve(settings, serve_worker=True)
    tenant = make_tenant(runtime.engine, ingestion=True)
    content = ledger(1, 5)
    name = publish(f"served-{settings.home.parent.name}.csv", content)
    serve.wait_ready()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        source_id, hook = register(client, tenant, "served")
        assert notify(client, hook, f"{server}/files/{name}").status_code == 200

        [file] = wait_for_final_files(
            client, tenant, source_id, count=1, timeout=15, also=serve.describe
        )

        assert (file["status"], file["rows"]) == ("delivered", 5)
        assert total_count(client, tenant, source_id) == 5
    # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught.
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)


def test_serve_builds_the_indexes_of_a_source_loaded_before_it(
    settings: Settings, runtime: Runtime, processes: Processes, tmp_path: Path
) -> None:
    """`tally admin load` returns once the rows are committed (decision 0010); the
    worker of the next `tally serve` builds the source's indexes."""
    tenant = make_tenant(runtime.engine)
    csv = tmp_path / "ledger.csv"
    csv.write_bytes(ledger(1, 50))
    loaded = runtime.catalogue.create_source_from_file(
        workspace_id=tenant.workspace_id, name="loaded", path=csv
    )  # what `tally admin load` runs
    assert loaded.resource.indexed_version == 0
    serve = processes.serve(settings, serve_worker=True)
    serve.wait_ready()

    def indexed() -> bool:
        with runtime.engine.connect() as conn:
            resource = resources.get_resource(conn, loaded.resource.id)
        return resource.indexed_version == resource.data_version

    eventually(indexed, timeout=WAIT_SECONDS, what="the loaded source's indexes")
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert total_count(client, tenant, loaded.resource.id) == 50
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)


def _query_processes_of(pid: int) -> set[int]:
    """Children of `pid` started by multiprocessing's spawn (the query processes)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"multiprocessing.spawn" in cmdline and b"resource_tracker" not in cmdline:
                found.add(int(child))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def _ignores(pid: int, signum: int) -> bool:
    """Whether the process ignores the signal (its SigIgn mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    [mask] = [line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")]
    return bool(int(mask, 16) >> (signum - 1) & 1)


def _serve_with_query_processes(
    settings: Settings, runtime: Runtime, processes: Processes
) -> tuple[ServeProcess, set[int]]:
    """`tally serve` with two query processes, one of which has answered a read; their
    process ids."""
    serve = processes.serve(settings, query_processes=2)
    serve.wait_ready()
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, "id\n1\n2\n")
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        assert total_count_v1(client, tenant, source.id) == 2  # answered by a query process
    children = _query_processes_of(serve.pid)
    assert len(children) == 2
    return serve, children


def test_query_processes_exit_when_serve_is_killed(
    settings: Settings, runtime: Runtime, processes: Processes
) -> None:
    """SIGKILL gives `tally serve` no chance to stop its pool: its query processes notice
    and exit by themselves, instead of holding database connections for ever."""
    serve, children = _serve_with_query_processes(settings, runtime, processes)
    serve.kill()
    eventually(
        lambda: not any(_running(pid) for pid in children),
        timeout=15,
        what="the query processes of a killed tally serve to exit",
    )


def test_serve_stops_its_query_processes_itself_when_the_group_is_terminated(
    settings: Settings, runtime: Runtime, processes: Processes
) -> None:
    """A service manager stops `tally serve` by sending SIGTERM to every process of its
    group (systemd's default; Ctrl-C sends SIGINT the same way). The query processes
    leave their end to the API process, which closes its pool: none is reported lost,
    and none is started again on the way out."""
    serve, children = _serve_with_query_processes(settings, runtime, processes)
    eventually(  # a query process still starting has not said so yet
        lambda: all(_ignores(pid, signal.SIGTERM) for pid in children),
        timeout=15,
        what="the query processes to ignore SIGTERM",
    )
    for pid in children:  # the group's signal reaches the children too
        os.kill(pid, signal.SIGTERM)
    # The kernel drops a signal its process ignores as it is sent: none is still on its
    # way, so no wait is needed to see that they live on.
    assert all(_running(pid) for pid in children)
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)
    assert "query_process_lost" not in serve.stderr_text()
    eventually(
        lambda: not any(_running(pid) for pid in children),
        timeout=15,
        what="the query processes to end with their API process",
    )


def total_count_v1(client: httpx.Client, tenant: Tenant, resource_id: int) -> int:
    response = client.get(f"/api/v1/resources/{resource_id}/data", headers=tenant.headers)
    assert response.status_code == 200, response.text
    return int(response.json()["meta"]["total_count"])


# --- SIGKILL ------------------------------------------------------------------------------


def test_worker_killed_mid_download_file_is_delivered_once(
    settings: Settings, runtime: Runtime, api: httpx.Client, processes: Processes, server: str
) -> None:
    tenant = make_tenant(runtime.engine, ingestion=True)
    source_id, hook = register(api, tenant, "killed downloading")
    content = ledger(1, 40)
    name = publish(f"slow-kill-{settings.home.parent.name}.csv", content)
    first = processes.worker(settings, concurrency=1)

    notify(api, hook, f"{server}/slow/{name}?chunk=100&delay=0.3")  # ~4 s to download
    wait_for_request(f"/slow/{name}", first)
    file_id = only_file_id(api, tenant, source_id)
    assert file_record(runtime, file_id).status == "downloading"
    assert first.kill() == -signal.SIGKILL

    killed = file_record(runtime, file_id)
    assert (killed.status, killed.rows, killed.lease_owner is not None) == (
        "downloading",
        None,
        True,
    )  # killed mid-download, its lease left to expire
    processes.worker(settings, concurrency=1)
    [file] = wait_for_final_files(api, tenant, source_id, count=1, timeout=WAIT_SECONDS)

    assert (file["status"], file["attempts"], file["error"]) == ("delivered", 2, None)
    assert (file["rows"], file["bytes"]) == (40, len(content))
    assert file["sha256"] == hashlib.sha256(content).hexdigest()
    assert len(requests_for(f"/slow/{name}")) == 2  # downloaded again from the start
    rows, total = read_rows(api, tenant, source_id, ordering="id", page_size=100)
    assert total == 40
    assert [row["id"] for row in rows] == list(range(1, 41))


def test_worker_killed_mid_load_rows_are_loaded_once(
    settings: Settings, runtime: Runtime, api: httpx.Client, processes: Processes, server: str
) -> None:
    rows = 300_000
    tenant = make_tenant(runtime.engine, ingestion=True)
    source_id, hook = register(api, tenant, "killed loading")
    content = ledger(1, rows)
    name = publish(f"big-{settings.home.parent.name}.csv", content)
    first = processes.worker(settings, concurrency=1)

    notify(api, hook, f"{server}/files/{name}")
    file_id = int(
        eventually(lambda: list_files(api, tenant, source_id), timeout=10, what="the file")[0]["id"]
    )
    eventually(
        lambda: file_record(runtime, file_id).status == "loading",
        timeout=WAIT_SECONDS,
        what="the load to start",
        interval=0.02,
        explain=first.describe,
    )
    assert first.kill() == -signal.SIGKILL

    assert file_record(runtime, file_id).status == "loading"  # killed mid-load
    assert total_count(api, tenant, source_id) == 0  # nothing of it committed
    processes.worker(settings, concurrency=1)
    [file] = wait_for_final_files(api, tenant, source_id, count=1, timeout=WAIT_SECONDS)

    assert (file["status"], file["attempts"], file["rows"]) == ("delivered", 2, rows)
    assert file["sha256"] == hashlib.sha256(content).hexdigest()
    assert len(requests_for(f"/files/{name}")) == 1  # the kept bytes were loaded again
    assert total_count(api, tenant, source_id) == rows
    assert distinct_ids(runtime, source_id) == rows
    assert total_count(api, tenant, source_id, id=150_000) == 1
    assert total_count(api, tenant, source_id, id__gt=rows - 10) == 10


# --- SIGTERM ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["worker", "serve"])
def test_sigterm_mid_download_stops_cleanly_and_file_is_delivered(
    kind: str,
    settings: Settings,
    runtime: Runtime,
    api: httpx.Client,
    processes: Processes,
    server: str,
) -> None:
    """`tally worker`, or `tally serve` with its embedded worker: SIGTERM finishes (or
    gives back) the job in hand; it never leaves the file behind a live lease."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    source_id, hook = register(api, tenant, "stopped downloading")
    content = ledger(1, 40)
    name = publish(f"slow-term-{settings.home.parent.name}.csv", content)
    first = (
        processes.worker(settings)
        if kind == "worker"
        else processes.serve(settings, serve_worker=True)
    )

    notify(api, hook, f"{server}/slow/{name}?chunk=100&delay=0.3")
    wait_for_request(f"/slow/{name}", first)
    file_id = only_file_id(api, tenant, source_id)
    assert file_record(runtime, file_id).status == "downloading"

    # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught.
    assert first.terminate(timeout=30) in ((0,) if kind == "worker" else (0, -signal.SIGTERM))
    left = file_record(runtime, file_id)
    assert left.status in ("delivered", "queued"), (left.status, left.lease_owner)
    if left.status == "queued":  # given back: no live lease keeps it from the next worker
        assert left.lease_owner is None
    assert "worker_stopped" in first.stderr_text()  # the graceful path, not a crash
    assert "Traceback" not in first.stderr_text()
    processes.worker(settings)
    [file] = wait_for_final_files(api, tenant, source_id, count=1, timeout=WAIT_SECONDS)

    assert (file["status"], file["rows"], file["error"]) == ("delivered", 40, None)
    rows, total = read_rows(api, tenant, source_id, ordering="id", page_size=100)
    assert total == 40
    assert [row["id"] for row in rows] == list(range(1, 41))


def test_worker_stops_on_sigterm_even_when_its_stderr_is_gone(
    settings: Settings, runtime: Runtime, api: httpx.Client, server: str
) -> None:
    """`tally worker 2>&1 | head -3`: the reader of its stderr is gone. The worker may
    fail to report, but it must not turn into a process SIGTERM cannot stop."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    source_id, hook = register(api, tenant, "no stderr")
    worker = subprocess.Popen(
        [sys.executable, "-m", "tally", "worker"],
        env=process_env(settings, log_level="INFO"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert worker.stderr is not None
        worker.stderr.close()  # before it writes its first line
        notify(api, hook, f"{server}/files/{publish(f'gone-{worker.pid}.csv', ledger(1, 3))}")
        [file] = wait_for_final_files(api, tenant, source_id, count=1, timeout=WAIT_SECONDS)
        assert file["status"] == "delivered"  # its threads run

        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            pytest.fail("the worker ignored SIGTERM for 10 s once its stderr was gone")
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait(10)


# --- two workers, 200 notifications at once -----------------------------------------------


async def notify_all(
    base_url: str,
    hook: str,
    payloads: list[dict[str, str]],
) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(payloads))
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as client:
        return list(
            await asyncio.gather(
                *[
                    client.post(f"/api/v2/webhooks/{hook}/feed-source", json=payload)
                    for payload in payloads
                ]
            )
        )


def test_two_workers_deliver_200_concurrent_notifications_once(
    settings: Settings, runtime: Runtime, processes: Processes, server: str
) -> None:
    count = 200
    serve = processes.serve(settings)
    workers = [processes.worker(settings), processes.worker(settings)]
    tenant = make_tenant(runtime.engine, ingestion=True)
    expected_rows: dict[str, int] = {}
    payloads = []
    for i in range(count):
        name = publish(f"batch-{settings.home.parent.name}-{i}.csv", ledger(i * 10, i % 3 + 1))
        expected_rows[name] = i % 3 + 1
        payloads.append({"file_url": f"{server}/files/{name}", "filename": name})
    serve.wait_ready()
    for worker in workers:
        worker.wait_ready()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        source_id, hook = register(client, tenant, "busy")

        replies = asyncio.run(notify_all(serve.url, hook, payloads))

        assert [r.status_code for r in replies] == [200] * count
        assert len({r.headers["x-tally-file-id"] for r in replies}) == count
        assert len(list_files(client, tenant, source_id)) == count  # every one queued
        done = wait_for_final_files(
            client,
            tenant,
            source_id,
            count=count,
            timeout=WAIT_SECONDS,
            also=lambda: "\n".join(w.describe() for w in workers),
        )
        assert len(done) == count
        assert Counter(f["status"] for f in done) == {"delivered": count}
        assert {f["filename"]: f["rows"] for f in done} == expected_rows
        assert {f["attempts"] for f in done} == {1}
        rows, total = read_rows(client, tenant, source_id, ordering="id", page_size=1000)
    assert total == sum(expected_rows.values())
    assert [row["id"] for row in rows] == sorted(
        i * 10 + j for i in range(count) for j in range(i % 3 + 1)
    )
    fetched = Counter(seen.path for seen in LOG.requests if seen.path[7:] in expected_rows)
    assert set(fetched.values()) == {1}
    assert len(fetched) == count  # each file downloaded exactly once
    delivered_by = [w.stderr_text().count("file_delivered") for w in workers]
    assert sum(delivered_by) == count
    assert all(n > 0 for n in delivered_by), delivered_by  # both took part
    for worker in workers:
        assert worker.terminate(timeout=20) == 0
        assert "Traceback" not in worker.stderr_text(), worker.describe()
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)
