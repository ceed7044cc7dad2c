"""One lease mechanism (storage/leases.py) for the queues whose rows are jobs: a file, a
status callback's delivery (a derived run's: test_derived_runs.py) claimed by one
worker is claimed by no other until its lease expires, on both backends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from support.factories import make_tenant
from tally.core.clock import utc_now
from tally.runtime import Runtime
from tally.services.callback_endpoints import CallbackConfig
from tally.services.notification_intake import Notification
from tally.services.webhooks import WebhookDefinition
from tally.storage import files, status_callbacks
from tally.storage.engine import write_connection

Claim = Callable[..., Any]


def queue_a_file(runtime: Runtime) -> None:
    """A file queued through the intake, its file.accepted event fanned out to one
    delivery (to an endpoint nothing listens on: nothing is sent here)."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    definition = WebhookDefinition(
        name="orders", callback=CallbackConfig(url="http://127.0.0.1:9/hook")
    )
    webhook_id = runtime.webhooks.register(
        workspace_id=tenant.workspace_id, definition=definition
    ).webhook_id
    payload = {"file_url": "http://127.0.0.1:9/x.csv", "filename": "x.csv"}
    runtime.intake.submit(Notification(webhook_id, payload, None)).result(timeout=30)
    assert runtime.callbacks.fan_out()


def claim(runtime: Runtime, how: Claim, worker: str, now: dt.datetime) -> Any:
    with write_connection(runtime.engine) as conn, conn.begin():
        return how(conn, worker=worker, now=now, lease_seconds=3)


@pytest.mark.parametrize(
    "how", [files.claim_next_file, status_callbacks.claim_next_delivery], ids=["file", "delivery"]
)
def test_a_claimed_job_is_no_other_workers_until_its_lease_expires(
    runtime: Runtime, how: Claim
) -> None:
    queue_a_file(runtime)
    now = utc_now()
    first = claim(runtime, how, "a", now)
    assert first is not None
    assert (first.lease_owner, first.attempts) == ("a", 1)
    assert claim(runtime, how, "b", now + dt.timedelta(seconds=2)) is None  # a's still
    later = now + dt.timedelta(seconds=4)  # a's lease expired: its worker died
    taken = claim(runtime, how, "b", later)
    assert taken is not None
    assert (taken.id, taken.lease_owner, taken.attempts) == (first.id, "b", 2)


def test_only_the_holder_extends_a_files_lease(runtime: Runtime) -> None:
    queue_a_file(runtime)
    now = utc_now()
    file = claim(runtime, files.claim_next_file, "a", now)
    with write_connection(runtime.engine) as conn, conn.begin():
        assert not files.extend_lease(conn, file.id, "b", now, 3)
        assert files.extend_lease(conn, file.id, "a", now + dt.timedelta(seconds=2), 3)
        assert files.holds_lease(conn, file.id, "a", now + dt.timedelta(seconds=4))
        assert not files.holds_lease(conn, file.id, "b", now)
        assert not files.holds_lease(conn, file.id, "a", now + dt.timedelta(seconds=6))
    # extended to 5 s after `now`: not free at 4 s, free at 6 s
    assert claim(runtime, files.claim_next_file, "b", now + dt.timedelta(seconds=4)) is None
    assert claim(runtime, files.claim_next_file, "b", now + dt.timedelta(seconds=6)) is not None
