"""Status callbacks end to end: outbox event -> delivery -> signed POST to a real
receiver on loopback, on both backends.

The receiver is a Starlette app that answers planned statuses and checks every signature
with the `standardwebhooks` package itself. The sender is driven directly (as the worker
does), with a short retry schedule.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from ipaddress import ip_network
from pathlib import Path

import anyio
import orjson
import pytest
from sqlalchemy import Engine
from standardwebhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from support.databases import make_settings
from support.factories import make_tenant
from support.servers import RequestLog, SeenRequest, record_requests, serve_app
from support.waiting import eventually
from tally.core.ids import hash_secret
from tally.core.status_callbacks import DeliveryStatus
from tally.net.fetch import AddressPolicy
from tally.net.signing import new_signing_secret
from tally.runtime import Runtime
from tally.runtime.policies import secret_box
from tally.services.callback_endpoints import CallbackConfig
from tally.services.notification_intake import Notification
from tally.services.status_callbacks import CallbackSender
from tally.services.webhooks import WebhookDefinition
from tally.settings import Settings
from tally.storage import files, outbox, resources, status_callbacks, webhooks
from tally.storage.status_callbacks import AttemptRecord, DeliveryRecord

LOOPBACK_ONLY = AddressPolicy(allow=(ip_network("127.0.0.0/8"),))
SHORT_SCHEDULE = (0.05, 0.05, 0.05)
CSV = b"city,population\nOslo,709037\nBergen,291940\n"
ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    # Downloads (the real path to file.delivered / file.failed) may reach the loopback
    # file routes; the sender gets its own AddressPolicy in each test.
    return make_settings(request, backend, tmp_path / "home", fetch_allow="127.0.0.0/8")


class Receiver:
    """A customer's endpoint: `/hooks/{name}` answers `plans[name]` in order, then 200."""

    def __init__(self, secret: str | None = None) -> None:
        self.secret = secret
        self.plans: dict[str, list[int]] = {}
        self.log = RequestLog()
        self.verified: list[bool] = []
        self.slow_seconds = 30.0  # `/hooks/slow` answers then, or when the client leaves

    def app(self) -> Starlette:
        routes = [
            Route("/hooks/{name}", self._hook, methods=["POST"]),
            Route("/moved-here", self._moved, methods=["GET", "POST"]),
            Route("/files/{name}", self._file),
        ]
        return Starlette(routes=routes)

    async def _hook(self, request: Request) -> Response:
        body = await request.body()
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, dict(request.headers))
                self.verified.append(True)
            except WebhookVerificationError:
                self.verified.append(False)
        name = request.path_params["name"]
        if name == "slow":
            with anyio.move_on_after(self.slow_seconds):
                # The body is read, so the next message is the client leaving.
                while (await request.receive())["type"] != "http.disconnect":
                    continue
        plan = self.plans.get(name, [])
        status = plan.pop(0) if plan else 200
        if 300 <= status < 400:
            return RedirectResponse("/moved-here", status_code=status)
        return Response(f"answer {status}".encode(), status)

    async def _moved(self, request: Request) -> Response:
        return Response(b"redirect target", 200)

    async def _file(self, request: Request) -> Response:
        if request.path_params["name"] != "data.csv":
            return Response(b"no such file", 404)
        return Response(CSV, media_type="text/csv")

    def hooks(self, name: str) -> list[SeenRequest]:
        return [seen for seen in self.log.requests if seen.path == f"/hooks/{name}"]


@pytest.fixture
def receiver() -> Receiver:
    return Receiver(secret=new_signing_secret())


@pytest.fixture
def base_url(receiver: Receiver) -> Iterator[str]:
    with serve_app(record_requests(receiver.app(), receiver.log)) as url:
        yield url


def make_sender(
    runtime: Runtime,
    *,
    policy: AddressPolicy = LOOPBACK_ONLY,
    schedule: tuple[float, ...] = SHORT_SCHEDULE,
    timeout: float = 5.0,
) -> CallbackSender:
    return CallbackSender(
        engine=runtime.engine,
        box=secret_box(runtime.settings),
        addresses=policy,
        retry_schedule_seconds=schedule,
        timeout_seconds=timeout,
        lease_seconds=30.0,
    )


def register(
    runtime: Runtime, url: str, *, secret: str | None, events: tuple[str, ...] | None = None
) -> str:
    """A webhook source with status callbacks; returns its webhook id."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    definition = WebhookDefinition(
        name=f"orders {tenant.workspace_id}",
        callback=CallbackConfig(url=url, secret=secret, events=events),
    )
    return runtime.webhooks.register(
        workspace_id=tenant.workspace_id, definition=definition
    ).webhook_id


def accept(
    runtime: Runtime,
    webhook_id: str,
    file_url: str = "http://127.0.0.1:9/x.csv",
) -> int:
    """A notification accepted through the real path (the intake that the API uses): file
    queued, file.accepted queued."""
    notification = Notification(
        webhook_id, {"file_url": file_url, "filename": "orders.csv"}, idempotency_key=None
    )
    return runtime.intake.submit(notification).result(timeout=30).file_id


def deliveries(engine: Engine, file_id: int) -> list[DeliveryRecord]:
    with engine.connect() as conn:
        return status_callbacks.list_deliveries_for_file(conn, file_id)


def attempts(engine: Engine, file_id: int) -> list[AttemptRecord]:
    with engine.connect() as conn:
        return status_callbacks.list_attempts_for_file(conn, file_id)


def settle(sender: CallbackSender, engine: Engine, *file_ids: int, within: float = 20.0) -> None:
    """Run the sender's jobs until no event is pending and every delivery is final."""

    def settled() -> bool:
        sender.fan_out()
        sender.send_one(worker="w1")
        with engine.connect() as conn:
            events_left = outbox.list_pending(conn, outbox.STATUS_CALLBACK, limit=1)
        found = [d for file_id in file_ids for d in deliveries(engine, file_id)]
        return not events_left and all(d.status != DeliveryStatus.PENDING for d in found)

    eventually(settled, timeout=within, what="the notifications to settle", interval=0.02)


def process_file(runtime: Runtime) -> None:
    """The download worker's job, run once (it queues file.delivered / file.failed)."""
    file = runtime.delivery.claim_file(worker="loader")
    assert file is not None
    runtime.delivery.process_file(file, worker="loader")


def body_of(seen: SeenRequest) -> dict[str, object]:
    parsed = orjson.loads(bytes(seen.body))
    assert isinstance(parsed, dict)
    return parsed


def test_signed_callback_verifies_at_the_receiver(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    assert receiver.secret is not None
    webhook_id = register(runtime, f"{base_url}/hooks/a", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    settle(make_sender(runtime), runtime.engine, file_id)

    [seen] = receiver.hooks("a")
    assert receiver.verified == [True]
    assert seen.method == "POST"
    assert seen.headers["content-type"] == "application/json"
    [sent] = deliveries(runtime.engine, file_id)
    assert sent.status == "delivered"
    assert seen.headers["webhook-id"] == sent.message_id
    assert abs(int(seen.headers["webhook-timestamp"]) - time.time()) < 60
    body = body_of(seen)
    assert body["type"] == "file.accepted"
    assert ISO_Z.match(str(body["timestamp"]))
    with runtime.engine.connect() as conn:
        webhook = webhooks.find_webhook_by_hash(conn, hash_secret(webhook_id))
    assert webhook is not None
    source_id = webhook.resource_id
    assert body["data"] == {
        "source_id": source_id,
        "file_id": file_id,
        "filename": "orders.csv",
        "status": "queued",
        "rows": None,
        "bytes": None,
        "sha256": None,
        "error": None,
    }
    [attempt] = attempts(runtime.engine, file_id)
    assert (attempt.attempt_number, attempt.status_code, attempt.error) == (1, 200, None)
    assert attempt.response_excerpt == "answer 200"
    assert attempt.url == f"{base_url}/hooks/a"
    assert attempt.next_attempt_at is None


def test_the_real_path_reports_accepted_then_delivered_with_the_file_facts(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    webhook_id = register(runtime, f"{base_url}/hooks/a", secret=receiver.secret)
    file_id = accept(runtime, webhook_id, f"{base_url}/files/data.csv")
    sender = make_sender(runtime)
    settle(sender, runtime.engine, file_id)
    process_file(runtime)
    settle(sender, runtime.engine, file_id)

    seen = receiver.hooks("a")
    assert [body_of(s)["type"] for s in seen] == ["file.accepted", "file.delivered"]
    assert receiver.verified == [True, True]
    accepted, delivered = (body_of(s)["data"] for s in seen)
    assert isinstance(accepted, dict)
    assert isinstance(delivered, dict)
    assert (accepted["status"], accepted["rows"], accepted["sha256"]) == ("queued", None, None)
    assert delivered == {
        **accepted,
        "status": "delivered",
        "rows": 2,
        "bytes": len(CSV),
        "sha256": hashlib.sha256(CSV).hexdigest(),
    }
    ids = [s.headers["webhook-id"] for s in seen]
    assert len(set(ids)) == 2


def test_a_file_taken_back_is_reported_as_retracted_with_who_took_it(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    webhook_id = register(runtime, f"{base_url}/hooks/a", secret=receiver.secret)
    file_id = accept(runtime, webhook_id, f"{base_url}/files/data.csv")
    sender = make_sender(runtime)
    process_file(runtime)
    settle(sender, runtime.engine, file_id)
    with runtime.engine.connect() as conn:
        source = resources.get_resource(conn, files.get_file(conn, file_id).resource_id)
    runtime.files.retract(
        workspace_id=source.workspace_id,
        source_id=source.id,
        file_id=file_id,
        by="api key sha256:0123456789ab",
    )
    settle(sender, runtime.engine, file_id)

    seen = receiver.hooks("a")
    assert [body_of(s)["type"] for s in seen] == [
        "file.accepted",
        "file.delivered",
        "file.retracted",
    ]
    assert receiver.verified == [True, True, True]
    delivered, retracted = (body_of(s)["data"] for s in seen[1:])
    assert isinstance(delivered, dict)
    assert retracted == {
        **delivered,
        "status": "retracted",
        "retracted_by": "api key sha256:0123456789ab",
    }


def test_the_events_filter_admits_only_the_listed_types(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    webhook_id = register(
        runtime, f"{base_url}/hooks/failures", secret=receiver.secret, events=("file.failed",)
    )
    file_id = accept(runtime, webhook_id, f"{base_url}/files/missing.csv")
    sender = make_sender(runtime)
    settle(sender, runtime.engine, file_id)
    assert receiver.hooks("failures") == []  # file.accepted is not in the filter
    assert deliveries(runtime.engine, file_id) == []

    process_file(runtime)  # the download answers 404: the file fails for good
    settle(sender, runtime.engine, file_id)
    [seen] = receiver.hooks("failures")
    body = body_of(seen)
    assert body["type"] == "file.failed"
    data = body["data"]
    assert isinstance(data, dict)
    assert data["status"] == "failed"
    assert "404" in str(data["error"])
    assert receiver.verified == [True]


def test_webhook_id_and_body_are_stable_across_retries(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    receiver.plans["flaky"] = [500, 500]
    webhook_id = register(runtime, f"{base_url}/hooks/flaky", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    settle(make_sender(runtime), runtime.engine, file_id)

    seen = receiver.hooks("flaky")
    assert len(seen) == 3
    [sent] = deliveries(runtime.engine, file_id)
    assert (sent.status, sent.attempts) == ("delivered", 3)
    assert {s.headers["webhook-id"] for s in seen} == {sent.message_id}
    assert len({bytes(s.body) for s in seen}) == 1
    assert receiver.verified == [True, True, True]
    tried = attempts(runtime.engine, file_id)
    assert [(a.attempt_number, a.status_code) for a in tried] == [(1, 500), (2, 500), (3, 200)]
    assert [a.response_excerpt for a in tried] == ["answer 500", "answer 500", "answer 200"]
    assert "HTTP 500" in str(tried[0].error)
    assert [a.next_attempt_at is not None for a in tried] == [True, True, False]
    assert tried[2].error is None


def test_without_a_secret_the_callback_is_unsigned_but_delivered(runtime: Runtime) -> None:
    receiver = Receiver(secret=None)
    with serve_app(record_requests(receiver.app(), receiver.log)) as url:
        webhook_id = register(runtime, f"{url}/hooks/plain", secret=None)
        file_id = accept(runtime, webhook_id)
        settle(make_sender(runtime), runtime.engine, file_id)
    [seen] = receiver.hooks("plain")
    assert "webhook-signature" not in seen.headers
    [sent] = deliveries(runtime.engine, file_id)
    assert seen.headers["webhook-id"] == sent.message_id
    assert abs(int(seen.headers["webhook-timestamp"]) - time.time()) < 60
    assert sent.status == "delivered"
    assert body_of(seen)["type"] == "file.accepted"


def test_a_redirect_is_not_followed_and_counts_as_a_failed_attempt(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    receiver.plans["moving"] = [302, 307]
    webhook_id = register(runtime, f"{base_url}/hooks/moving", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    settle(make_sender(runtime), runtime.engine, file_id)

    assert "/moved-here" not in receiver.log.paths
    tried = attempts(runtime.engine, file_id)
    assert [a.status_code for a in tried] == [302, 307, 200]
    assert all("redirects are not followed" in (a.error or "") for a in tried[:2])
    assert [d.status for d in deliveries(runtime.engine, file_id)] == ["delivered"]


def test_410_disables_the_endpoint_and_stops_its_pending_deliveries(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    receiver.plans["gone"] = [410]
    webhook_id = register(runtime, f"{base_url}/hooks/gone", secret=receiver.secret)
    first, second = accept(runtime, webhook_id), accept(runtime, webhook_id)
    sender = make_sender(runtime)
    settle(sender, runtime.engine, first, second)

    assert len(receiver.hooks("gone")) == 1  # the second delivery was never sent
    [gone] = [a for f in (first, second) for a in attempts(runtime.engine, f)]
    assert (gone.status_code, gone.next_attempt_at) == (410, None)
    assert [d.status for f in (first, second) for d in deliveries(runtime.engine, f)] == [
        "failed",
        "failed",
    ]
    later = accept(runtime, webhook_id)
    settle(sender, runtime.engine, later)
    assert deliveries(runtime.engine, later) == []
    assert len(receiver.hooks("gone")) == 1
    with runtime.engine.connect() as conn:
        [delivery_row] = status_callbacks.list_deliveries_for_file(conn, first)
        assert status_callbacks.endpoint_disabled(conn, delivery_row.endpoint_id)


def test_an_exhausted_schedule_fails_the_delivery_with_every_attempt_recorded(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    receiver.plans["down"] = [503] * 10
    webhook_id = register(runtime, f"{base_url}/hooks/down", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    settle(make_sender(runtime, schedule=(0.05, 0.1, 0.05)), runtime.engine, file_id)

    [sent] = deliveries(runtime.engine, file_id)
    assert (sent.status, sent.attempts) == ("failed", 4)
    assert sent.finished_at is not None
    tried = attempts(runtime.engine, file_id)
    assert [(a.attempt_number, a.status_code) for a in tried] == [
        (1, 503),
        (2, 503),
        (3, 503),
        (4, 503),
    ]
    assert len(receiver.hooks("down")) == 4
    for before, after, delay in zip(tried[:-1], tried[1:], (0.05, 0.1, 0.05), strict=True):
        assert before.next_attempt_at is not None
        assert before.next_attempt_at - before.attempted_at >= dt.timedelta(seconds=delay)
        assert after.attempted_at >= before.next_attempt_at
    assert tried[-1].next_attempt_at is None


def test_a_slow_receiver_times_out_and_the_attempt_says_so(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    webhook_id = register(runtime, f"{base_url}/hooks/slow", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    # The read limit (1 s) ends each attempt, long before the receiver would answer and
    # (with room for a loaded machine) before the whole-call limit of twice that.
    settle(make_sender(runtime, schedule=(0.05,), timeout=1.0), runtime.engine, file_id)

    tried = attempts(runtime.engine, file_id)
    assert len(tried) == 2
    for attempt in tried:
        assert attempt.status_code is None
        assert str(attempt.error).startswith(f"timed out talking to {base_url}/hooks/slow")
        assert 950 <= attempt.duration_ms < int(receiver.slow_seconds * 1000)
    assert [d.status for d in deliveries(runtime.engine, file_id)] == ["failed"]


def test_the_default_address_policy_refuses_a_loopback_callback(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    webhook_id = register(runtime, f"{base_url}/hooks/inside", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    settle(make_sender(runtime, policy=AddressPolicy(), schedule=(0.05,)), runtime.engine, file_id)

    assert receiver.log.requests == []
    tried = attempts(runtime.engine, file_id)
    assert [(a.attempt_number, a.status_code) for a in tried] == [(1, None), (2, None)]
    for attempt in tried:
        assert attempt.error == "callback refused: 127.0.0.1 is a loopback address"
    assert [d.status for d in deliveries(runtime.engine, file_id)] == ["failed"]


def test_neither_the_secret_nor_the_query_string_is_logged(
    runtime: Runtime, receiver: Receiver, base_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert receiver.secret is not None
    receiver.plans["q"] = [500]
    token = "tok-do-not-log-4f9a"
    webhook_id = register(runtime, f"{base_url}/hooks/q?token={token}", secret=receiver.secret)
    file_id = accept(runtime, webhook_id)
    settle(make_sender(runtime), runtime.engine, file_id)

    assert [s.query for s in receiver.hooks("q")] == [f"token={token}"] * 2
    assert caplog.records, "the sender logs each attempt"
    for record in caplog.records:
        text = f"{record.getMessage()} {record.__dict__}"
        assert token not in text
        assert receiver.secret not in text
    assert all(
        token not in a.url and token not in (a.error or "")
        for a in attempts(runtime.engine, file_id)
    )


def test_two_senders_never_send_the_same_delivery_twice(
    runtime: Runtime, receiver: Receiver, base_url: str
) -> None:
    webhook_id = register(runtime, f"{base_url}/hooks/busy", secret=receiver.secret)
    file_ids = [accept(runtime, webhook_id) for _ in range(50)]
    senders = [(make_sender(runtime), f"w{n}") for n in (1, 2)]
    failures: list[BaseException] = []

    def work(sender: CallbackSender, worker: str) -> None:
        def all_received() -> bool:
            if len(receiver.hooks("busy")) >= 50:
                return True
            sender.fan_out()
            sender.send_one(worker=worker)
            return False

        try:
            eventually(all_received, timeout=60, what="50 status callbacks", interval=0.01)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=pair) for pair in senders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    settle(senders[0][0], runtime.engine, *file_ids)  # nothing left over, nothing re-sent

    ids = [s.headers["webhook-id"] for s in receiver.hooks("busy")]
    assert len(ids) == 50
    assert len(set(ids)) == 50
    assert receiver.verified == [True] * 50
    sent = [d for f in file_ids for d in deliveries(runtime.engine, f)]
    assert len(sent) == 50
    assert {(d.status, d.attempts) for d in sent} == {("delivered", 1)}
    tried = [a for f in file_ids for a in attempts(runtime.engine, f)]
    assert len(tried) == 50
