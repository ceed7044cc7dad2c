"""`tally serve` and `tally worker` as real subprocesses, and the HTTP calls e2e tests make.

* `process_defaults()` are the Settings overrides every end-to-end test starts from:
  loopback downloads allowed, short leases, polls and retries, and one fresh
  TALLY_SECRET_KEY (every process of a test must share it: it seals the credentials and
  URLs one process stores and another opens).
* `process_env(settings)` turns a Settings object into the TALLY_* environment of a
  child process (nothing TALLY_* is inherited from the test runner).
* `running_processes(log_dir)` yields a `Processes` that starts `python -m tally worker`
  and `python -m tally serve` with stdout and stderr captured to files, and on exit stops
  every one still alive (SIGTERM, then SIGKILL): no test leaves a process behind.
* the ingestion helpers at the end register webhooks, notify, and read file statuses
  and row counts over HTTP (waiting with `support.waiting.eventually`).

Everything listens on, and talks to, 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import httpx
from pydantic import SecretStr

from support.factories import Tenant
from support.servers import LOOPBACK, free_port
from support.waiting import eventually
from tally.core.sealing import SecretBox
from tally.settings import Settings

READY_TIMEOUT_SECONDS = 60.0  # cold imports on a busy 2-core machine take seconds
STOP_GRACE_SECONDS = 5.0
FINAL_STATUSES = ("delivered", "duplicate", "failed", "retracted")
_numbers = itertools.count(1)


def process_defaults(**overrides: object) -> dict[str, object]:
    """Settings overrides for a test whose processes must move quickly; one new key."""
    values: dict[str, object] = {
        "secret_key": SecretStr(SecretBox.new_key().decode()),
        "fetch_allow": "127.0.0.0/8",
        "lease_seconds": 3.0,
        "worker_poll_seconds": 0.1,
        "retry_base_seconds": 0.2,
        "retry_max_seconds": 1.0,
        "callback_retry_schedule": "0.2,0.5,1",
        "callback_timeout_seconds": 5.0,
        "serve_worker": False,
        # The default (10) would let the other test runner's work starve the worker on
        # a busy machine; tests/e2e/test_worker_processes.py checks the niceness itself.
        "worker_niceness": 0,
    }
    values.update(overrides)
    return values


def process_env(settings: Settings, **overrides: object) -> dict[str, str]:
    """The environment of a child process running with `settings` (plus `overrides`)."""
    unknown = set(overrides) - set(Settings.model_fields)
    if unknown:
        raise ValueError(f"not settings: {sorted(unknown)}")
    if settings.secret_key is None:
        raise ValueError("give the processes of a test one TALLY_SECRET_KEY")
    values = {**settings.model_dump(), **overrides}
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, Path):
            value = value.resolve()
        env[f"TALLY_{name.upper()}"] = str(value)
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --- one child process --------------------------------------------------------------------


class TallyProcess:
    """A `python -m tally ...` child; its stdout and stderr go to files in `log_dir`."""

    def __init__(self, kind: str, args: list[str], env: dict[str, str], log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        number = next(_numbers)
        self.kind = kind
        self.stderr_path = log_dir / f"{kind}-{number}.stderr"
        self.stdout_path = log_dir / f"{kind}-{number}.stdout"
        self._files: list[IO[bytes]] = [self.stdout_path.open("wb"), self.stderr_path.open("wb")]
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tally", kind, *args],
            env=env,
            cwd=log_dir,
            stdin=subprocess.DEVNULL,
            stdout=self._files[0],
            stderr=self._files[1],
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def describe(self) -> str:
        """For failure messages: who this is and the end of what it wrote."""
        state = "running" if self.alive else f"exited {self.popen.returncode}"
        return f"{self.kind} pid {self.pid} ({state}); stderr tail:\n{self.stderr_text()[-3000:]}"

    def wait_for_stderr(self, text: str, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        def written() -> bool:
            if text in self.stderr_text():
                return True
            if not self.alive:
                raise AssertionError(f"exited before writing {text!r}: {self.describe()}")
            return False

        eventually(written, timeout=timeout, what=f"{text!r} on stderr", explain=self.describe)

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        self.wait_for_stderr(" started", timeout)

    def terminate(self, timeout: float) -> int:
        """SIGTERM; the exit code, which must come within `timeout` seconds."""
        self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"still running {timeout} s after SIGTERM: {self.describe()}"
            ) from None

    def kill(self) -> int:
        """SIGKILL: no clean-up code of ours runs; the exit code (-9)."""
        if self.alive:
            self.popen.send_signal(signal.SIGKILL)
        return self.popen.wait(STOP_GRACE_SECONDS * 2)

    def close(self) -> None:
        """Stop it if it still runs (SIGTERM, then SIGKILL), reap it, close its files."""
        try:
            if self.alive:
                self.popen.send_signal(signal.SIGTERM)
                try:
                    self.popen.wait(STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    self.popen.send_signal(signal.SIGKILL)
                    self.popen.wait(STOP_GRACE_SECONDS * 2)
        finally:
            for handle in self._files:
                handle.close()


class ServeProcess(TallyProcess):
    """`tally serve` on a free loopback port; ready once GET /health answers."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        super().__init__("serve", ["--host", LOOPBACK, "--port", str(self.port)], env, log_dir)

    def wait_ready(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        def answering() -> bool:
            if not self.alive:
                raise AssertionError(f"serve exited while starting: {self.describe()}")
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
            return False

        eventually(answering, timeout=timeout, what="GET /health", explain=self.describe)


class Processes:
    """Starts tally processes for one test (or module) and stops them all at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[TallyProcess] = []

    def worker(
        self, settings: Settings, *, concurrency: int | None = None, **overrides: object
    ) -> TallyProcess:
        """Start `tally worker` (not waiting: call `wait_ready` when it matters). It logs
        at INFO unless told otherwise, so its stderr shows what it did."""
        args = ["--concurrency", str(concurrency)] if concurrency is not None else []
        env = process_env(settings, **{"log_level": "INFO", **overrides})
        process = TallyProcess("worker", args, env, self.log_dir)
        self.started.append(process)
        return process

    def serve(self, settings: Settings, **overrides: object) -> ServeProcess:
        """Start `tally serve` (not waiting: call `wait_ready` before sending requests)."""
        env = process_env(settings, **{"log_level": "INFO", **overrides})
        process = ServeProcess(env, self.log_dir)
        self.started.append(process)
        return process

    def admin(self, settings: Settings, *args: str) -> TallyProcess:
        """Start `tally admin ARGS...` (its JSON answer is in `stdout_path` once it exits)."""
        process = TallyProcess("admin", list(args), process_env(settings), self.log_dir)
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in reversed(self.started):
            process.close()


@contextlib.contextmanager
def running_processes(log_dir: Path) -> Iterator[Processes]:
    processes = Processes(log_dir)
    try:
        yield processes
    finally:
        processes.close()


# --- the ingestion API and the Data API over HTTP -----------------------------------------


def register_webhook(client: httpx.Client, tenant: Tenant, name: str, **webhook: Any) -> Any:
    """POST /api/v2/webhooks; `notification_config` goes beside `webhook`, the rest in it."""
    body: dict[str, Any] = {"name": name, "webhook": webhook}
    if "notification_config" in webhook:
        body["notification_config"] = webhook.pop("notification_config")
    response = client.post("/api/v2/webhooks", json=body, headers=tenant.v2_headers)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["name"] == name
    return created


def notify(
    client: httpx.Client,
    webhook_id: str,
    url: str,
    *,
    filename: str | None = None,
    key: str | None = None,
) -> httpx.Response:
    payload = {"file_url": url, **({"filename": filename} if filename else {})}
    headers = {"Idempotency-Key": key} if key else {}
    return client.post(f"/api/v2/webhooks/{webhook_id}/feed-source", json=payload, headers=headers)


def list_files(client: httpx.Client, tenant: Tenant, source_id: int) -> list[dict[str, Any]]:
    """Every file of the source, oldest first (all pages)."""
    found: list[dict[str, Any]] = []
    after: int | None = 0
    while after is not None:
        response = client.get(
            f"/api/v2/sources/{source_id}/files",
            params={"after": after, "limit": 1000},
            headers=tenant.v2_headers,
        )
        assert response.status_code == 200, response.text
        page = response.json()
        found.extend(page["data"])
        after = page["next_after"]
    return found


def wait_for_final_files(
    client: httpx.Client,
    tenant: Tenant,
    source_id: int,
    *,
    count: int,
    timeout: float,
    also: Callable[[], str] | None = None,
    check: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """The source's files once `count` of them exist and every one has a final status.

    `check()` runs at every poll and may raise to give up early (a crashed worker); on
    time-out the message shows the files, and `also()` (e.g. a worker's stderr)."""

    def probe() -> list[dict[str, Any]] | None:
        if check is not None:
            check()
        files = list_files(client, tenant, source_id)
        done = len(files) >= count and all(f["status"] in FINAL_STATUSES for f in files)
        return files if done else None

    def explain() -> str:
        now = [
            (f["id"], f["status"], f["attempts"], f["error"])
            for f in list_files(client, tenant, source_id)
        ]
        return f"files now: {now}" + (f"\n{also()}" if also is not None else "")

    return eventually(
        probe,
        timeout=timeout,
        what=f"{count} final file(s) of source {source_id}",
        interval=0.2,
        explain=explain,
    )


def read_rows(
    client: httpx.Client, tenant: Tenant, source_id: int, **params: str | int
) -> tuple[list[dict[str, Any]], int]:
    """(rows of page 1, total_count) from the Data API; decimals as `Decimal`."""
    response = client.get(
        f"/api/v1/resources/{source_id}/data", params=params, headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    body = json.loads(response.text, parse_float=Decimal)  # decimals keep their digits
    return body["data"], body["meta"]["total_count"]


def total_count(
    client: httpx.Client,
    tenant: Tenant,
    source_id: int,
    **filters: str | int,
) -> int:
    return read_rows(client, tenant, source_id, page_size=1, **filters)[1]
