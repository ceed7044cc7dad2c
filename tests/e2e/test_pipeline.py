"""The delivery pipeline end to end, on SQLite and PostgreSQL: webhooks registered and
notified over HTTP, files fetched from real servers on loopback by a real `tally worker`
process, outcomes read back through GET /api/v2/sources/{id}/files and the Data API.

Most tests share one deployment per backend (module scope): the API served by uvicorn
on loopback and one worker subprocess, as one service serves many customers; each test
brings its own tenant and source. The SSRF test needs a worker with the guard left
closed, so it gets a database and a worker of its own.
"""

from __future__ import annotations

import base64
import concurrent.futures
import datetime as dt
import hashlib
import itertools
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from support.databases import BACKENDS, make_settings
from support.factories import Tenant, make_tenant
from support.processes import (
    Processes,
    TallyProcess,
    list_files,
    notify,
    process_defaults,
    read_rows,
    register_webhook,
    running_processes,
    total_count,
    wait_for_final_files,
)
from support.servers import (
    RequestLog,
    SeenRequest,
    ServerSecrets,
    file_server_app,
    record_requests,
    serve_app,
)
from support.waiting import eventually
from tally.api.app import create_app
from tally.net.signing import new_signing_secret
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings
from tally.storage import resources
from tally.storage.files import QUEUE_CHANNEL

MAX_FILE_BYTES = 50_000
DEADLINE_SECONDS = 5.0
RETRY_MAX_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 1.0
WAIT_SECONDS = 60.0
SECRETS = ServerSecrets()
_names = itertools.count(1)


# --- a file server, and one deployment per backend ----------------------------------------


class FileServer:
    """`file_server_app` over a dict tests add to, plus ``/flaky/{name}?fails=N``: 503 for
    the first N requests of that name, then the file. Every request lands in `log`."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.log = RequestLog()
        self.url = ""
        self._calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def app(self) -> ASGIApp:
        routes = [Route("/flaky/{name}", self._flaky), Mount("/", app=file_server_app(self.files))]
        return record_requests(Starlette(routes=routes), self.log)

    async def _flaky(self, request: Request) -> Response:
        name = request.path_params["name"]
        with self._lock:
            self._calls[name] += 1
            calls = self._calls[name]
        if calls <= int(request.query_params.get("fails", "0")):
            return Response(b"try later", 503)
        return Response(self.files[name], media_type="text/csv")

    def add(self, content: bytes, stem: str = "file") -> str:
        """Serve `content` under a new name; the name (unique across the module)."""
        name = f"{stem}-{next(_names)}.csv"
        self.files[name] = content
        return name

    def requests_for(self, path: str) -> list[SeenRequest]:
        return [seen for seen in self.log.requests if seen.path == path]


@dataclass
class Stack:
    """The API and a worker process on one database."""

    runtime: Runtime
    client: httpx.Client
    worker: TallyProcess
    stderr_checked: int = 0

    def new_tenant(self) -> Tenant:
        """A tenant of its own for one test, with ingestion enabled."""
        return make_tenant(self.runtime.engine, ingestion=True)

    def check_no_crash(self) -> None:
        """The worker's job wrapper logs a crash and carries on (the file is retried when
        its lease expires): a traceback since the last check is a failure, at once."""
        stderr = self.worker.stderr_text()
        new = stderr[self.stderr_checked :]
        if "Traceback" in new:
            self.stderr_checked = len(stderr)
            raise AssertionError(f"the worker crashed on a job:\n{new[-4000:]}")

    def wait(
        self, tenant: Tenant, source_id: int, count: int, timeout: float = WAIT_SECONDS
    ) -> list[dict[str, Any]]:
        """The source's files once all `count` are final, the worker not crashing."""
        files = wait_for_final_files(
            self.client,
            tenant,
            source_id,
            count=count,
            timeout=timeout,
            also=self.worker.describe,
            check=self.check_no_crash,
        )
        self.check_no_crash()
        self.stderr_checked = len(self.worker.stderr_text())
        return files


@pytest.fixture(scope="module")
def server() -> Iterator[FileServer]:
    files = FileServer()
    with serve_app(files.app()) as url:
        files.url = url
        yield files


def pipeline_settings(request: pytest.FixtureRequest, backend: str, home: Path) -> Settings:
    return make_settings(
        request,
        backend,
        home,
        **process_defaults(
            delivery_deadline_seconds=DEADLINE_SECONDS,
            retry_max_seconds=RETRY_MAX_SECONDS,
            fetch_read_timeout_seconds=READ_TIMEOUT_SECONDS,
            max_file_bytes=MAX_FILE_BYTES,
            worker_concurrency=3,
        ),
    )


@pytest.fixture(scope="module", params=BACKENDS)
def stack(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """Shared by the module: the API (uvicorn in-process) and one `tally worker`."""
    root = tmp_path_factory.mktemp(f"pipeline-{request.param}")
    settings = pipeline_settings(request, request.param, root / "home")
    runtime = build_runtime(settings)
    try:
        with running_processes(root / "logs") as processes:
            worker = processes.worker(settings)
            with (
                serve_app(create_app(settings, runtime)) as url,
                httpx.Client(base_url=url, timeout=30) as client,
            ):
                worker.wait_ready()
                yield Stack(runtime, client, worker)
            assert worker.alive, worker.describe()
    finally:
        runtime.close()


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    """For tests with a database of their own (and the conftest `api` on it)."""
    return pipeline_settings(request, backend, tmp_path / "home")


@pytest.fixture
def own_stack(
    settings: Settings, runtime: Runtime, api: httpx.Client, processes: Processes
) -> Stack:
    """A deployment of the test's own: a file that crashes the worker again and again
    (retried each time its lease expires) cannot disturb the other tests. Ready before
    the test notifies: a file's delivery deadline runs from its notification, and a
    worker still starting would eat into it."""
    worker = processes.worker(settings)
    worker.wait_ready()
    return Stack(runtime, api, worker)


def sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


# --- 1. the webhook flow ------------------------------------------------------------------

LEDGER = (
    b"id,amount,currency,booked_on\n"
    b"1,10.50,EUR,2024-01-31\n2,-3.25,USD,2024-02-01\n3,0.00,EUR,2024-02-29\n"
)

LEDGER_MORE = b"id,amount,currency,booked_on\n4,7.00,EUR,2024-03-01\n5,8.00,EUR,2024-03-02\n"


def test_notified_file_is_delivered_and_readable(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(
        stack.client,
        tenant,
        "ledger",
        file_mapping={"url_field": "data.file.url", "filename_field": "data.file.name"},
        response_config={"status_code": 202, "body": {"received": True, "by": "tally"}},
    )
    name = server.add(LEDGER, "ledger")
    url = f"{server.url}/files/{name}?X-Signature=presigned-9f8e7d"

    reply = stack.client.post(
        f"/api/v2/webhooks/{created['webhook_id']}/feed-source",
        json={"data": {"file": {"url": url, "name": "ledger-2024-01.csv"}}},
    )

    assert reply.status_code == 202
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json() == {"received": True, "by": "tally"}
    [file] = stack.wait(tenant, created["id"], 1)
    assert file["id"] == int(reply.headers["x-tally-file-id"])
    assert file["source_id"] == created["id"]
    assert (file["status"], file["error"], file["attempts"]) == ("delivered", None, 1)
    assert (file["rows"], file["bytes"], file["sha256"]) == (3, len(LEDGER), sha256(LEDGER))
    assert file["filename"] == "ledger-2024-01.csv"
    assert file["origin"] == "webhook"
    assert file["url"] == f"{server.url}/files/{name}"  # the query string is not shown
    assert file["finished_at"] is not None
    one = stack.client.get(
        f"/api/v2/sources/{created['id']}/files/{file['id']}", headers=tenant.v2_headers
    )
    assert one.status_code == 200
    assert one.json() == file
    [seen] = server.requests_for(f"/files/{name}")
    assert seen.query == "X-Signature=presigned-9f8e7d"  # the whole URL was fetched
    rows, total = read_rows(stack.client, tenant, created["id"], ordering="id")
    assert total == 3
    assert rows == [
        {"id": 1, "amount": Decimal("10.50"), "currency": "EUR", "booked_on": "2024-01-31"},
        {"id": 2, "amount": Decimal("-3.25"), "currency": "USD", "booked_on": "2024-02-01"},
        {"id": 3, "amount": Decimal("0.00"), "currency": "EUR", "booked_on": "2024-02-29"},
    ]


# --- 2. download credentials --------------------------------------------------------------

PAIR = b"id,amount\n1,1.25\n2,2.50\n"
WRONG_PASSWORD, WRONG_KEY, WRONG_TOKEN = "wrong-pass-4471", "wrong-key-4471", "wrong-token-4471"
CREDENTIALS: dict[str, tuple[str, dict[str, str], dict[str, str], tuple[str, str]]] = {
    # kind: (route prefix, right credentials, wrong ones, (header, value the server wants))
    "basic_auth": (
        "/basic",
        {"type": "basic_auth", "username": SECRETS.username, "password": SECRETS.password},
        {"type": "basic_auth", "username": SECRETS.username, "password": WRONG_PASSWORD},
        (
            "authorization",
            "Basic " + base64.b64encode(f"{SECRETS.username}:{SECRETS.password}".encode()).decode(),
        ),
    ),
    "api_key": (
        "/api-key",
        {"type": "api_key", "api_key": SECRETS.api_key},
        {"type": "api_key", "api_key": WRONG_KEY},
        ("x-api-key", SECRETS.api_key),
    ),
    "bearer": (
        "/bearer",
        {"type": "bearer", "token": SECRETS.token},
        {"type": "bearer", "token": WRONG_TOKEN},
        ("authorization", f"Bearer {SECRETS.token}"),
    ),
}
SECRET_TEXTS = [
    SECRETS.password,
    SECRETS.api_key,
    SECRETS.token,
    WRONG_PASSWORD,
    WRONG_KEY,
    WRONG_TOKEN,
    base64.b64encode(f"{SECRETS.username}:{SECRETS.password}".encode()).decode(),
    base64.b64encode(f"{SECRETS.username}:{WRONG_PASSWORD}".encode()).decode(),
]


def test_download_credentials_are_checked_and_never_shown(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    shown: list[str] = []  # every body tally answered with
    cases = []
    for kind, (prefix, right, wrong, expected_header) in CREDENTIALS.items():
        for label, credentials in (("right", right), ("wrong", wrong)):
            response = stack.client.post(
                "/api/v2/webhooks",
                headers=tenant.v2_headers,
                json={"name": f"{kind} {label}", "webhook": {"credentials": credentials}},
            )
            assert response.status_code == 201, response.text
            shown.append(response.text)
            name = server.add(PAIR, kind)
            reply = notify(
                stack.client, response.json()["webhook_id"], f"{server.url}{prefix}/files/{name}"
            )
            assert reply.status_code == 200
            shown.append(reply.text)
            cases.append(
                (kind, label, response.json()["id"], f"{prefix}/files/{name}", expected_header)
            )

    for kind, label, source_id, path, (header, value) in cases:
        [file] = stack.wait(tenant, source_id, 1)
        listing = stack.client.get(f"/api/v2/sources/{source_id}/files", headers=tenant.v2_headers)
        single = stack.client.get(
            f"/api/v2/sources/{source_id}/files/{file['id']}", headers=tenant.v2_headers
        )
        shown += [listing.text, single.text]
        [seen] = server.requests_for(path)
        if label == "right":
            assert seen.headers.get(header) == value, kind
            assert (file["status"], file["rows"], file["error"]) == ("delivered", 2, None), kind
            assert total_count(stack.client, tenant, source_id) == 2
        else:
            assert seen.headers.get(header) != value, kind
            assert file["status"] == "failed", kind
            assert file["error"] == f"HTTP 401 Unauthorized from {server.url}{path}", kind
            assert (file["attempts"], file["rows"]) == (1, None), kind  # 401: no retry
            assert total_count(stack.client, tenant, source_id) == 0

    stderr = stack.worker.stderr_text()
    assert "file_failed" in stderr  # the worker did log the failures ...
    for secret in SECRET_TEXTS:  # ... and nowhere does a credential show
        assert secret not in stderr, secret
        for text in shown:
            assert secret not in text, secret


# --- 3. redirects, retries, failures ------------------------------------------------------


def test_redirects_are_followed_to_the_file(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "redirected")
    name = server.add(PAIR, "moved")

    assert (
        notify(
            stack.client, created["webhook_id"], f"{server.url}/redirect/2/files/{name}"
        ).status_code
        == 200
    )

    [file] = stack.wait(tenant, created["id"], 1)
    assert (file["status"], file["rows"], file["attempts"]) == ("delivered", 2, 1)
    assert file["sha256"] == sha256(PAIR)
    assert file["url"] == f"{server.url}/redirect/2/files/{name}"
    hops = [seen.path for seen in server.log.requests if seen.path.endswith(f"/files/{name}")]
    assert hops == [f"/redirect/2/files/{name}", f"/redirect/1/files/{name}", f"/files/{name}"]
    assert total_count(stack.client, tenant, created["id"]) == 2


def test_unavailable_server_is_retried_until_the_file_arrives(
    own_stack: Stack, server: FileServer
) -> None:
    stack = own_stack
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "flaky")
    name = server.add(PAIR, "flaky")

    notify(stack.client, created["webhook_id"], f"{server.url}/flaky/{name}?fails=2")

    [file] = stack.wait(tenant, created["id"], 1)
    assert (file["status"], file["rows"], file["error"]) == ("delivered", 2, None)
    assert file["attempts"] == 3  # 503, 503, 200
    assert len(server.requests_for(f"/flaky/{name}")) == 3
    assert total_count(stack.client, tenant, created["id"]) == 2


def test_missing_file_fails_at_once(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "missing")
    path = f"/files/never-published-{next(_names)}.csv"

    notify(stack.client, created["webhook_id"], f"{server.url}{path}")

    [file] = stack.wait(tenant, created["id"], 1)
    assert file["status"] == "failed"
    assert file["error"] == f"HTTP 404 Not Found from {server.url}{path}"
    assert (file["attempts"], file["rows"], file["bytes"]) == (1, None, None)
    assert len(server.requests_for(path)) == 1
    assert total_count(stack.client, tenant, created["id"]) == 0


def test_hanging_server_is_retried_until_the_deadline(own_stack: Stack, server: FileServer) -> None:
    stack = own_stack
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "hanging")
    tag = f"t{next(_names)}"

    notify(stack.client, created["webhook_id"], f"{server.url}/hang?seconds=30&tag={tag}")

    [file] = stack.wait(tenant, created["id"], 1)
    assert file["status"] == "failed"
    # Either the last attempt's retry would have begun past the deadline, or, on a
    # loaded machine, it was due before it and claimed after it: the error names the
    # timeout either way.
    gave_up = f"(gave up after {file['attempts']} attempts)"
    late = "not delivered within the delivery deadline; the last attempt: "
    error = file["error"].removeprefix(late)
    assert error.startswith(f"timed out talking to {server.url}/hang")
    assert f"read limit {READ_TIMEOUT_SECONDS:g} s" in error
    assert error.endswith(gave_up) != file["error"].startswith(late)
    assert file["attempts"] >= 2
    tries = [seen for seen in server.requests_for("/hang") if tag in seen.query]
    assert len(tries) == file["attempts"]
    # Given up only when the next retry would land past the deadline, not before: the
    # file's own times, which a slow machine can only move apart (no upper bound).
    queued = dt.datetime.fromisoformat(file["created_at"])
    finished = dt.datetime.fromisoformat(file["finished_at"])
    deadline = queued + dt.timedelta(seconds=DEADLINE_SECONDS)
    assert finished + dt.timedelta(seconds=RETRY_MAX_SECONDS) >= deadline
    assert total_count(stack.client, tenant, created["id"]) == 0


def test_oversized_file_fails_without_rows(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "oversized")
    lines = [b"id,amount"] + [f"{i},{i}.25".encode() for i in range(1, 6000)]
    big = b"\n".join(lines) + b"\n"
    assert len(big) > MAX_FILE_BYTES
    name = server.add(big, "big")

    notify(stack.client, created["webhook_id"], f"{server.url}/files/{name}")
    notify(stack.client, created["webhook_id"], f"{server.url}/chunked/{MAX_FILE_BYTES + 30_000}")

    announced, chunked = stack.wait(tenant, created["id"], 2)
    assert announced["status"] == chunked["status"] == "failed"
    assert announced["error"] == (
        f"file larger than {MAX_FILE_BYTES} bytes (the server announced {len(big)} bytes)"
    )
    assert chunked["error"] == f"file larger than {MAX_FILE_BYTES} bytes"
    assert announced["attempts"] == chunked["attempts"] == 1
    assert announced["rows"] is chunked["rows"] is None
    assert total_count(stack.client, tenant, created["id"]) == 0
    # Nothing of either download was kept, not even a partial temp file.
    assert list((stack.runtime.settings.blob_dir / str(created["id"])).rglob("*")) == []


# --- 4. the SSRF guard --------------------------------------------------------------------


def test_loopback_urls_are_refused_without_fetch_allow(
    settings: Settings, runtime: Runtime, api: httpx.Client, processes: Processes
) -> None:
    stack = Stack(runtime, api, processes.worker(settings, fetch_allow=""))  # the default
    # ready before notifying: the deadline runs from the notification, and a worker still
    # starting on a slow machine ate it (the file failed "not delivered within ...")
    stack.worker.wait_ready()
    tenant = stack.new_tenant()
    created = register_webhook(api, tenant, "ssrf")
    log = RequestLog()
    with serve_app(record_requests(file_server_app({"data.csv": PAIR}), log)) as url:
        port = url.rsplit(":", 1)[1]
        for host in ("127.0.0.1", "localhost"):
            reply = notify(api, created["webhook_id"], f"http://{host}:{port}/files/data.csv")
            assert reply.status_code == 200  # accepted: the guard acts at download time

        by_ip, by_name = stack.wait(tenant, created["id"], 2)

        assert log.requests == []  # nothing reached the server
        assert by_ip["status"] == by_name["status"] == "failed"
        assert by_ip["attempts"] == by_name["attempts"] == 1  # refusals are not retried
        assert by_ip["error"] == "download refused: 127.0.0.1 is a loopback address"
        assert by_name["error"].startswith("download refused: ")
        assert "loopback address" in by_name["error"]
        assert by_name["error"].endswith("(from localhost)")
        assert total_count(api, tenant, created["id"]) == 0
        # The server was there all along: it was the guard that said no.
        assert httpx.get(f"{url}/files/data.csv").content == PAIR
        assert len(log.requests) == 1


# --- 5. bad CSV files ---------------------------------------------------------------------

FIRST = b"id,amount,currency\n1,10.00,EUR\n2,20.50,USD\n"
BAD_FILES = {
    "ragged": (
        b"id,amount,currency\n10,1.00,EUR\n11,2.00\n12,3.00,EUR\n",
        ["line 3", "expected 3 fields, found 2"],
    ),
    "columns": (
        b"id,amount,note\n20,1.00,hello\n",
        ["line 1", "missing columns: currency", "unexpected columns: note"],
    ),
    "typed": (
        b"id,amount,currency\n30,1.00,EUR\n31,abc,EUR\n32,2.00,EUR\n",
        ["line 3", "column 'amount'", "'abc'"],
    ),
}


def test_bad_csv_files_fail_and_leave_no_rows(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "strict")
    notify(stack.client, created["webhook_id"], f"{server.url}/files/{server.add(FIRST)}")
    [first] = stack.wait(tenant, created["id"], 1)
    assert (first["status"], first["rows"]) == ("delivered", 2)

    for content, _ in BAD_FILES.values():
        notify(stack.client, created["webhook_id"], f"{server.url}/files/{server.add(content)}")

    _, *bad = stack.wait(tenant, created["id"], 1 + len(BAD_FILES))
    for file, (label, (_, fragments)) in zip(bad, BAD_FILES.items(), strict=True):
        assert file["status"] == "failed", label
        assert file["rows"] is None, label
        assert file["attempts"] == 1, label  # a bad file stays bad: no retry
        for fragment in fragments:
            assert fragment in file["error"], (label, file["error"])
    rows, total = read_rows(stack.client, tenant, created["id"], ordering="id")
    assert total == 2
    assert rows == [
        {"id": 1, "amount": Decimal("10.00"), "currency": "EUR"},
        {"id": 2, "amount": Decimal("20.50"), "currency": "USD"},
    ]
    assert total_count(stack.client, tenant, created["id"], id__gte=10) == 0


# --- 6. duplicates and idempotency --------------------------------------------------------


def test_same_bytes_notified_twice_are_loaded_once(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(stack.client, tenant, "twice")
    name = server.add(LEDGER, "again")

    for query in ("v=1", "v=2"):
        reply = notify(stack.client, created["webhook_id"], f"{server.url}/files/{name}?{query}")
        assert reply.status_code == 200

    files = stack.wait(tenant, created["id"], 2)
    by_status = {file["status"]: file for file in files}
    assert sorted(by_status) == ["delivered", "duplicate"]
    delivered, duplicate = by_status["delivered"], by_status["duplicate"]
    assert delivered["rows"] == 3
    assert duplicate["rows"] is None
    assert duplicate["error"] == f"the same bytes were delivered as file {delivered['id']}"
    assert delivered["sha256"] == duplicate["sha256"] == sha256(LEDGER)
    assert len(server.requests_for(f"/files/{name}")) == 2  # both were fetched
    assert total_count(stack.client, tenant, created["id"]) == 3


def test_idempotency_key_queues_one_file(stack: Stack, server: FileServer) -> None:
    tenant = stack.new_tenant()
    created = register_webhook(
        stack.client,
        tenant,
        "idempotent",
        response_config={
            "status_code": 202,
            "content_type": "application/vnd.ack+json",
            "body": {"queued": True},
        },
    )
    hook = created["webhook_id"]
    first_url = f"{server.url}/files/{server.add(LEDGER)}"
    second_url = f"{server.url}/files/{server.add(LEDGER_MORE)}"

    replies = [notify(stack.client, hook, first_url, key="order-0001") for _ in range(3)]
    with concurrent.futures.ThreadPoolExecutor(5) as pool:  # retries racing each other
        raced = list(
            pool.map(lambda _: notify(stack.client, hook, second_url, key="order-0002"), range(5))
        )

    for group in (replies, raced):
        assert {(r.status_code, r.content, r.headers["content-type"]) for r in group} == {
            (202, b'{"queued":true}', "application/vnd.ack+json")
        }
        assert len({r.headers["x-tally-file-id"] for r in group}) == 1
    first, second = stack.wait(tenant, created["id"], 2)
    assert len(list_files(stack.client, tenant, created["id"])) == 2
    assert (first["idempotency_key"], second["idempotency_key"]) == ("order-0001", "order-0002")
    assert first["id"] == int(replies[0].headers["x-tally-file-id"])
    assert second["id"] == int(raced[0].headers["x-tally-file-id"])
    assert (first["status"], first["rows"]) == ("delivered", 3)
    assert (second["status"], second["rows"]) == ("delivered", 2)
    assert total_count(stack.client, tenant, created["id"]) == 5
    assert total_count(stack.client, tenant, created["id"], id__in="4,5") == 2


# --- 11. signed status callbacks ----------------------------------------------------------


class Receiver:
    """A customer's endpoint: verifies every message with `standardwebhooks` itself."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.messages: list[tuple[str, dict[str, Any]]] = []  # (webhook-id, payload)
        self.unverified: list[bytes] = []
        self._lock = threading.Lock()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hooks", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        try:
            payload = Webhook(self.secret).verify(body, dict(request.headers))
        except WebhookVerificationError:
            with self._lock:
                self.unverified.append(body)
            return Response(b"bad signature", 400)
        with self._lock:
            self.messages.append((request.headers["webhook-id"], payload))
        return Response(b"", 204)

    def events_of(self, file_id: int) -> list[dict[str, Any]]:
        with self._lock:
            return [p for _, p in self.messages if p["data"]["file_id"] == file_id]


def test_status_callbacks_are_signed_and_verifiable(stack: Stack, server: FileServer) -> None:
    receiver = Receiver(new_signing_secret())
    tenant = stack.new_tenant()
    with serve_app(receiver.app()) as hooks_url:
        created = register_webhook(
            stack.client,
            tenant,
            "notified",
            notification_config={
                "url": f"{hooks_url}/hooks",
                "secret": receiver.secret,
                "events": ["file.accepted", "file.delivered", "file.failed"],
            },
        )
        name = server.add(LEDGER, "notified")
        missing = f"/files/gone-{next(_names)}.csv"

        good = notify(
            stack.client,
            created["webhook_id"],
            f"{server.url}/files/{name}?v=1",
            filename="ledger.csv",
        )
        delivered = stack.wait(tenant, created["id"], 1)[0]
        again = notify(stack.client, created["webhook_id"], f"{server.url}/files/{name}?v=2")
        duplicate = stack.wait(tenant, created["id"], 2)[1]
        bad = notify(stack.client, created["webhook_id"], f"{server.url}{missing}")
        failed = stack.wait(tenant, created["id"], 3)[2]
        assert (delivered["status"], duplicate["status"], failed["status"]) == (
            "delivered",
            "duplicate",
            "failed",
        )

        def arrived() -> bool:
            return (
                len(receiver.events_of(delivered["id"])) == 2
                and len(receiver.events_of(duplicate["id"])) >= 1
                and len(receiver.events_of(failed["id"])) == 2
            )

        eventually(
            arrived,
            timeout=WAIT_SECONDS,
            what="the status callbacks",
            explain=lambda: f"{receiver.messages}\n{stack.worker.describe()}",
        )

    assert receiver.unverified == []
    assert [int(r.headers["x-tally-file-id"]) for r in (good, again, bad)] == [
        delivered["id"],
        duplicate["id"],
        failed["id"],
    ]
    accepted, done = sorted(receiver.events_of(delivered["id"]), key=lambda p: p["timestamp"])
    assert (accepted["type"], done["type"]) == ("file.accepted", "file.delivered")
    assert accepted["timestamp"] < done["timestamp"]
    assert accepted["data"] == {
        "source_id": created["id"],
        "file_id": delivered["id"],
        "filename": "ledger.csv",
        "status": "queued",
        "rows": None,
        "bytes": None,
        "sha256": None,
        "error": None,
    }
    assert done["data"] == {
        "source_id": created["id"],
        "file_id": delivered["id"],
        "filename": "ledger.csv",
        "status": "delivered",
        "rows": 3,
        "bytes": len(LEDGER),
        "sha256": sha256(LEDGER),
        "error": None,
    }
    # file.duplicate was not subscribed to: the duplicate was only ever announced.
    assert [p["type"] for p in receiver.events_of(duplicate["id"])] == ["file.accepted"]
    assert sorted(p["type"] for p in receiver.events_of(failed["id"])) == [
        "file.accepted",
        "file.failed",
    ]
    [failure] = [p for p in receiver.events_of(failed["id"]) if p["type"] == "file.failed"]
    assert failure["data"]["status"] == "failed"
    assert failure["data"]["error"] == f"HTTP 404 Not Found from {server.url}{missing}"
    ids = [message_id for message_id, _ in receiver.messages]
    assert len(ids) == len(set(ids)) == 5  # one message id per event


# --- 6. waking idle workers ----------------------------------------------------------------


def test_queued_files_wake_an_idle_postgresql_worker(
    request: pytest.FixtureRequest, tmp_path: Path, server: FileServer, processes: Processes
) -> None:
    """A worker that would poll only once an hour still takes each notified file: the
    accepting transaction NOTIFYs, the worker LISTENs. (On SQLite a worker in another
    process polls; one in the same process is woken: tests/integration/test_uploads.py.)

    Each file is notified only once the worker has nothing left to do: its listener is
    seen LISTENing, and the first file's follow-up work (rows' JSON, indexes) is done.
    Nothing shows from outside the moment an idle thread goes to sleep, so a thread
    could still be in its last, empty pass when the notification comes; then the test
    passes without needing the wake-up. The order of events cannot make it fail."""
    settings = make_settings(
        request, "postgresql", tmp_path / "home", **process_defaults(worker_poll_seconds=3600)
    )
    runtime = build_runtime(settings)
    try:
        with (
            serve_app(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            stack = Stack(runtime, client, processes.worker(settings))
            stack.worker.wait_ready()
            tenant = stack.new_tenant()
            created = register_webhook(client, tenant, "woken")
            for n in (1, 2):
                eventually(
                    lambda: worker_listens(runtime) and nothing_unfinished(runtime),
                    timeout=WAIT_SECONDS,
                    what="the worker to listen with nothing left to do",
                    explain=stack.worker.describe,
                )
                name = server.add(LEDGER, f"woken-{n}")
                assert notify(
                    client, created["webhook_id"], f"{server.url}/files/{name}"
                ).is_success
                files = stack.wait(tenant, created["id"], n)
                assert [f["status"] for f in files] == ["delivered", "duplicate"][:n]
    finally:
        runtime.close()


def worker_listens(runtime: Runtime) -> bool:
    """Whether a session of the database LISTENs for queued files (the worker's)."""
    with runtime.engine.connect() as conn:
        listening = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query = :listen"
            ),
            {"listen": f"LISTEN {QUEUE_CHANNEL}"},
        ).scalar_one()
    return bool(listening)


def nothing_unfinished(runtime: Runtime) -> bool:
    """Whether every resource's follow-up work (rows' JSON, indexes) is done."""
    with runtime.engine.connect() as conn:
        return resources.next_unfinished(conn) is None
