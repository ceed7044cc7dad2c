"""Notifications for a source are accepted while that source's file loads (PostgreSQL),
and a load's COPY keeps to its pace while they are (decision 0022).

PostgreSQL keeps a file's whole load in one transaction (decision 0003), holding the
source's row lock so that two loads of one source never interleave. A notification's
file row refers to the same source row (a foreign key), and PostgreSQL checks that
reference under a KEY SHARE lock: a FOR UPDATE lock on the source would keep the intake
(one thread for every source) waiting until the load commits. The load's lock must
exclude other loaders, not the intake. SQLite stages a load outside its one write lock
(decision 0013), so these transactions are PostgreSQL's alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import exc, select

from support.databases import BACKENDS
from support.factories import LEDGER_CSV, make_tenant, write_file
from tally.core.limits import DEFAULT_FILE_LIMITS
from tally.runtime import Runtime
from tally.runtime.policies import secret_box
from tally.services.delivery import DeliveryService
from tally.services.file_loading import FileLoading
from tally.services.loader.load import load_into
from tally.services.loader.pace import LoadPace
from tally.services.notification_intake import Notification, NotificationIntake
from tally.services.webhooks import RegisteredWebhook, WebhookDefinition
from tally.storage import resources
from tally.storage.blobs import BlobStore
from tally.storage.engine import write_connection
from tally.storage.schema import files

pytestmark = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "postgresql"])


@pytest.fixture
def webhook(runtime: Runtime) -> RegisteredWebhook:
    tenant = make_tenant(runtime.engine, ingestion=True)
    definition = WebhookDefinition(name=f"drops {tenant.workspace_id}")
    return runtime.webhooks.register(workspace_id=tenant.workspace_id, definition=definition)


@pytest.fixture
def intake(runtime: Runtime) -> Iterator[NotificationIntake]:
    intake = NotificationIntake(runtime.engine, secret_box(runtime.settings), deadline_seconds=60)
    yield intake
    intake.close()


def test_a_notification_is_accepted_while_its_source_loads_a_file(
    runtime: Runtime, webhook: RegisteredWebhook, intake: NotificationIntake
) -> None:
    source_id = webhook.source.id
    csv = write_file(LEDGER_CSV)
    try:
        with write_connection(runtime.engine) as loading, loading.begin():
            loaded = load_into(loading, source_id, csv)  # the load's transaction, still open
            accepted = intake.submit(
                Notification(webhook.webhook_id, {"file_url": "https://files.example/b.csv"}, None)
            ).result(timeout=30)
            with runtime.engine.connect() as conn:  # committed before the load did
                queued = conn.execute(select(files.c.status).where(files.c.id == accepted.file_id))
                assert queued.scalar_one() == "queued"
                assert resources.get_resource(conn, source_id).data_version == 0
    finally:
        csv.unlink()
    assert accepted.created
    assert loaded.rows == 6
    with runtime.engine.connect() as conn:
        assert resources.get_resource(conn, source_id).data_version == 1


def test_two_loads_of_one_source_still_exclude_each_other(
    runtime: Runtime, webhook: RegisteredWebhook
) -> None:
    source_id = webhook.source.id
    with write_connection(runtime.engine) as first, first.begin():
        resources.lock_resource(first, source_id)
        with write_connection(runtime.engine) as second, second.begin():
            second.exec_driver_sql("SET LOCAL lock_timeout = '100ms'")
            with pytest.raises(exc.OperationalError, match="lock timeout"):
                resources.lock_resource(second, source_id)


def test_a_worker_paces_its_loads_once_it_hears_files_queued_by_the_api(
    runtime: Runtime, webhook: RegisteredWebhook, intake: NotificationIntake, tmp_path: Path
) -> None:
    """The intake's wake-up reaches the worker's listener, which marks the loads' pace
    busy; a load's COPY then waits what its bytes cost at the rate (a clock that stands
    still, so each wait is exact), and still loads every row."""
    waits: list[float] = []
    pace = LoadPace(1000.0, clock=lambda: 50.0, sleep=waits.append)
    loading = FileLoading(
        runtime.engine, limits=DEFAULT_FILE_LIMITS, staging_dir=tmp_path, pace=pace
    )
    box = secret_box(runtime.settings)
    blobs = BlobStore(tmp_path / "blobs")
    delivery = DeliveryService(
        runtime.engine, box, blobs, runtime.delivery.policy, runtime.catalogue, loading
    )
    heard, stop = threading.Event(), threading.Event()
    listener = threading.Thread(target=delivery.listen_for_files, args=(heard.set, stop))
    listener.start()
    try:
        for n in range(100):  # until the listener, started meanwhile, hears one
            body = {"file_url": f"https://files.example/{n}.csv"}
            intake.submit(Notification(webhook.webhook_id, body, None)).result(timeout=30)
            if heard.wait(0.1):
                break
    finally:
        stop.set()
        listener.join()
    assert heard.is_set()
    csv = write_file(LEDGER_CSV)
    try:
        with write_connection(runtime.engine) as conn, conn.begin():
            loaded = load_into(conn, webhook.source.id, csv, pace=pace)
    finally:
        csv.unlink()
    assert loaded.rows == 6
    assert waits == []  # its one chunk went at once
    second = write_file(LEDGER_CSV.replace("alpha", "omega"))
    try:
        with write_connection(runtime.engine) as conn, conn.begin():
            load_into(conn, webhook.source.id, second, pace=pace)
    finally:
        second.unlink()
    assert waits == [pytest.approx(len(LEDGER_CSV.encode()) / 1000.0)]
