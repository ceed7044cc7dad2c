"""Hostile and huge files end to end (issue #14, points 1 and 2), on SQLite and PostgreSQL.

Every file ends: a file over a limit, a file the database refuses, a gzip bomb, each
ends `failed` within a bounded number of attempts, with an error naming what was wrong
(line and column when there is one) and a `file.failed` status callback; no
library writes its chatter to the worker's log. While a large file loads, the service
keeps answering: health, reads, and new notifications are accepted before the load
ends. The API runs in-process (uvicorn on loopback), the worker is a real `tally
worker`; hostile files are generated here (support/hostile.py), small on disk.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from support.databases import BACKENDS, make_settings
from support.factories import Tenant, make_tenant
from support.hostile import gzip_bomb, gzipped, ledger_csv, wide_csv
from support.processes import (
    TallyProcess,
    list_files,
    notify,
    process_defaults,
    register_webhook,
    running_processes,
    wait_for_final_files,
)
from support.servers import file_server_app, serve_app
from support.waiting import eventually
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings

MAX_ATTEMPTS = 3
WAIT_SECONDS = 90.0
LIBRARY_CHATTER = ("re2.cc", "CoalesceWalker", "absl::", "DFA out of memory")
_names = itertools.count(1)


class Hooks:
    """A customer's status-callback endpoint: records each event's type per file."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hooks", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        payload = await request.json()
        with self._lock:
            self.events.append(payload)
        return Response(b"", 204)

    def types_for(self, file_id: int) -> list[str]:
        with self._lock:
            return [e["type"] for e in self.events if e["data"]["file_id"] == file_id]


@dataclass
class Stack:
    runtime: Runtime
    client: httpx.Client
    worker: TallyProcess
    files: dict[str, bytes]
    files_url: str
    hooks: Hooks
    hooks_url: str

    def tenant(self) -> Tenant:
        return make_tenant(self.runtime.engine, ingestion=True)

    def serve_file(self, content: bytes, suffix: str = ".csv") -> str:
        name = f"hostile-{next(_names)}{suffix}"
        self.files[name] = content
        return f"{self.files_url}/files/{name}"

    def webhook(self, tenant: Tenant) -> dict[str, Any]:
        return register_webhook(  # type: ignore[no-any-return]
            self.client,
            tenant,
            f"hostile {next(_names)}",
            notification_config={
                "url": f"{self.hooks_url}/hooks",
                "events": ["file.accepted", "file.delivered", "file.failed"],
            },
        )

    def deliver(
        self, content: bytes, suffix: str = ".csv", tenant: Tenant | None = None
    ) -> dict[str, Any]:
        """Notify a new webhook of `content`; its one file once it is final."""
        tenant = tenant or self.tenant()
        created = self.webhook(tenant)
        reply = notify(self.client, created["webhook_id"], self.serve_file(content, suffix))
        assert reply.is_success, reply.text
        [file] = wait_for_final_files(
            self.client,
            tenant,
            created["id"],
            count=1,
            timeout=WAIT_SECONDS,
            also=self.worker.describe,
        )
        return file

    def upload(self, content: bytes, content_type: str = "text/csv") -> dict[str, Any]:
        """Upload `content` to a new placeholder source; its one file once it is final."""
        tenant = self.tenant()
        created = self.client.post(
            "/api/v2/sources", json={"name": f"up {next(_names)}"}, headers=tenant.v2_headers
        )
        assert created.status_code == 201, created.text
        source_id = created.json()["id"]
        fed = self.client.post(
            f"/api/v2/sources/{source_id}/feed-source",
            content=content,
            headers={**tenant.v2_headers, "content-type": content_type},
        )
        assert fed.status_code == 202, fed.text
        [file] = wait_for_final_files(
            self.client, tenant, source_id, count=1, timeout=WAIT_SECONDS, also=self.worker.describe
        )
        return file

    def failed_callback_sent(self, file_id: int) -> None:
        eventually(
            lambda: "file.failed" in self.hooks.types_for(file_id),
            timeout=WAIT_SECONDS,
            what=f"the file.failed status callback of file {file_id}",
            explain=lambda: f"{self.hooks.types_for(file_id)}\n{self.worker.describe()}",
        )

    def assert_quiet_log(self) -> None:
        stderr = self.worker.stderr_text()
        noise = [line for line in stderr.splitlines() if any(t in line for t in LIBRARY_CHATTER)]
        assert noise == [], f"{len(noise)} lines of library chatter, e.g. {noise[:3]}"
        assert "Traceback" not in stderr, stderr[-4000:]


def says(error: str | None, *texts: str) -> None:
    """The file's error holds every one of `texts`."""
    assert error is not None
    missing = [text for text in texts if text not in error]
    assert missing == [], f"{missing} not in {error!r}"


def hostile_settings(
    request: pytest.FixtureRequest, backend: str, home: Path, **overrides: object
) -> Settings:
    return make_settings(
        request,
        backend,
        home,
        **process_defaults(
            delivery_max_attempts=MAX_ATTEMPTS,
            delivery_deadline_seconds=120.0,
            max_file_bytes=64 * 1024 * 1024,
            worker_concurrency=1,
            **overrides,
        ),
    )


@contextlib.contextmanager
def deployment(settings: Settings, log_dir: Path, **worker: object) -> Iterator[Stack]:
    """The API in-process, a loopback file server and hooks endpoint, one `tally worker`
    (with `worker` settings of its own: a limit raised, say)."""
    runtime = build_runtime(settings)
    files: dict[str, bytes] = {}
    hooks = Hooks()
    try:
        with (
            running_processes(log_dir) as processes,
            serve_app(Starlette(routes=[Mount("/", app=file_server_app(files))])) as files_url,
            serve_app(hooks.app()) as hooks_url,
            serve_app(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=60) as client,
        ):
            process = processes.worker(settings, **worker)
            process.wait_ready()
            yield Stack(runtime, client, process, files, files_url, hooks, hooks_url)
    finally:
        runtime.close()


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """Shared by the module's tests that need only the default limits."""
    root = tmp_path_factory.mktemp(f"hostile-{request.param}")
    settings = hostile_settings(request, request.param, root / "home")
    with deployment(settings, root / "logs") as shared:
        yield shared


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return hostile_settings(request, backend, tmp_path / "home")


# --- 1. limits: checked before anything is built, the line and column named -------------

LIMITS = {
    # name: (file, what the error says, line, column)
    "2,100 columns (SQLite's own limit is 2,000)": (
        wide_csv(2100),
        ("2100 columns", "TALLY_MAX_COLUMNS"),
        1,
        "c500",
    ),
    "1,600 columns (PostgreSQL's own limit)": (
        wide_csv(1600),
        ("1600 columns", "TALLY_MAX_COLUMNS"),
        1,
        "c500",
    ),
    "100,000 columns (RE2: pattern too large)": (
        wide_csv(100_000),
        ("header", "TALLY_MAX_HEADER_BYTES"),
        1,
        None,
    ),
}


@pytest.mark.parametrize("case", list(LIMITS))
def test_a_file_over_a_limit_fails_at_once_naming_line_and_column(stack: Stack, case: str) -> None:
    content, texts, line, column = LIMITS[case]
    file = stack.upload(gzipped(content), "text/csv")
    assert (file["status"], file["attempts"]) == ("failed", 1), file
    says(file["error"], *texts, f"line {line}", *([f"column '{column}'"] if column else []))
    stack.assert_quiet_log()


def test_a_notified_file_over_a_limit_fails_and_says_so(stack: Stack) -> None:
    file = stack.deliver(wide_csv(2100))
    assert (file["status"], file["attempts"]) == ("failed", 1), file
    assert "TALLY_MAX_COLUMNS" in file["error"], file["error"]
    stack.failed_callback_sent(file["id"])
    stack.assert_quiet_log()


def test_a_long_line_or_value_names_its_line_and_column(settings: Settings, tmp_path: Path) -> None:
    limits = {"max_line_bytes": 20_000, "max_cell_bytes": 1000}
    with deployment(settings, tmp_path / "logs", **limits) as own:
        long_line = own.upload(b"id,note\n1,short\n2," + b"x" * 30_000 + b"\n")
        multiline = b'"' + b"y\n" * 1000 + b'"'  # short lines, one long value
        long_value = own.upload(b"id,note,amount\n1,ok,1.00\n2," + multiline + b",2.00\n")
        own.assert_quiet_log()
    assert (long_line["status"], long_line["attempts"]) == ("failed", 1), long_line
    says(long_line["error"], "line 3", "TALLY_MAX_LINE_BYTES")
    file = long_value
    assert (file["status"], file["attempts"]) == ("failed", 1), file
    says(file["error"], "line 3", "column 'note'", "TALLY_MAX_CELL_BYTES")


def test_many_wide_columns_load_without_library_chatter(settings: Settings, tmp_path: Path) -> None:
    """800 columns of timestamps with offsets: a regular expression over such rows runs
    RE2 out of memory, which writes to stderr; the loader must not build one."""
    with deployment(settings, tmp_path / "logs", max_columns=1000) as own:
        file = own.upload(wide_csv(800, rows=50, value="2024-01-02T03:04:05+01:00"))
        own.assert_quiet_log()
    assert (file["status"], file["rows"]) == ("delivered", 50), file


# --- 1. any failure ends the file, within bounded attempts -----------------------------


def test_a_table_the_database_refuses_fails_the_file_at_once(
    settings: Settings, tmp_path: Path
) -> None:
    """With the column limit raised past the database's own, the database refuses the
    table, as it would at every attempt: `failed` at the first, in its words."""
    with deployment(settings, tmp_path / "logs", max_columns=2500) as own:
        file = own.deliver(wide_csv(2100))
        own.failed_callback_sent(file["id"])
        own.assert_quiet_log()
    assert (file["status"], file["attempts"]) == ("failed", 1), file
    says(file["error"], "the database refused the table for the file's 2100 columns: ")
    assert "columns" in file["error"].partition(": ")[2], file["error"]


# --- 2. compressed files: the limits apply to what they expand to ------------------------


def test_decompressed_bytes_count_against_the_size_limit(
    settings: Settings, tmp_path: Path
) -> None:
    content = ledger_csv(20_000)  # ~0.5 MB, ~4 to 1 in gzip: no bomb, only too large
    assert len(gzipped(content)) < 200_000 < len(content)
    with deployment(settings, tmp_path / "logs", max_file_bytes=200_000) as own:
        notified = own.deliver(gzipped(content), ".csv.gz")
        own.failed_callback_sent(notified["id"])
    assert (notified["status"], notified["attempts"]) == ("failed", 1), notified
    says(notified["error"], "200000 bytes", "decompress")


def test_a_gzip_bomb_fails_fast_with_a_clear_error(stack: Stack) -> None:
    bomb = gzip_bomb(1 << 30)  # ~1 MB that expands to 1 GiB of rows
    file = stack.deliver(bomb, ".csv.gz")
    assert (file["status"], file["attempts"]) == ("failed", 1), file
    says(file["error"], "compress", "TALLY_MAX_COMPRESSION_RATIO")
    stack.failed_callback_sent(file["id"])
    uploaded = stack.upload(bomb, "text/csv")
    assert (uploaded["status"], uploaded["error"]) == ("failed", file["error"]), uploaded
    stack.assert_quiet_log()


# --- 2. the service keeps answering while a large file loads -----------------------------

LARGE_ROWS = 400_000
ANSWERS_WANTED = 1  # before the fix, none: each notification waited for the load


def test_the_service_answers_while_a_large_file_loads(stack: Stack) -> None:
    """Health, a read and a new notification each answer while the large file is still
    loading (its status read after the answer came): none waited for the load."""
    tenant = stack.tenant()
    small = stack.deliver(ledger_csv(10), tenant=tenant)
    assert small["status"] == "delivered", small
    big = stack.webhook(tenant)
    other = stack.webhook(tenant)
    url = stack.serve_file(gzipped(ledger_csv(LARGE_ROWS)), ".csv.gz")
    assert notify(stack.client, big["webhook_id"], url).is_success

    def status() -> str:
        [file] = list_files(stack.client, tenant, big["id"])
        return str(file["status"])

    eventually(lambda: status() == "loading", timeout=WAIT_SECONDS, what="the load to start")
    answered_while_loading = 0
    while status() == "loading":
        health = stack.client.get("/health")
        read = stack.client.get(
            f"/api/v1/resources/{small['source_id']}/data", headers=tenant.headers
        )
        accepted = notify(stack.client, other["webhook_id"], stack.serve_file(ledger_csv(2)))
        assert (health.status_code, read.status_code) == (200, 200), read.text
        assert accepted.is_success, accepted.text
        if status() == "loading":
            answered_while_loading += 1
    assert answered_while_loading >= ANSWERS_WANTED, (
        f"only {answered_while_loading} rounds of requests were answered while the file loaded"
    )
    [file] = wait_for_final_files(
        stack.client, tenant, big["id"], count=1, timeout=WAIT_SECONDS, also=stack.worker.describe
    )
    assert (file["status"], file["rows"]) == ("delivered", LARGE_ROWS), file
