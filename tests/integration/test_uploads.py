"""The upload flow below HTTP (services/uploads.py), on SQLite and PostgreSQL.

Sources are created, bodies staged into the real blob store, files queued, and then the
real pipeline runs them (DeliveryService.claim_file + process_file, then the notification
sender against a loopback endpoint); rows are read back through the Data API service.
"""

from __future__ import annotations

import hashlib
import json
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from support.databases import make_settings
from support.factories import Tenant, make_tenant, read_data, run_pipeline
from support.servers import RequestLog, record_requests, serve_app
from support.waiting import eventually
from tally.core.columns import Column, ColumnType
from tally.core.errors import (
    DefinitionRejectedError,
    IdempotencyKeyReusedError,
    InvalidUploadError,
    ResourceNotFoundError,
    UploadTooLargeError,
)
from tally.core.files import FileRecord
from tally.core.source_bodies import declared_column
from tally.runtime import Runtime, build_runtime
from tally.runtime.policies import address_policy, secret_box
from tally.services import uploads
from tally.services.callback_endpoints import CallbackConfig
from tally.services.catalogue import PLACEHOLDER_COLUMNS
from tally.services.sources import SourceDefinition
from tally.services.status_callbacks import CallbackSender
from tally.services.uploads import UploadService
from tally.storage import files, outbox, resources, webhooks
from tally.storage.blobs import BlobStore
from tally.storage.resources import Resource
from tally.worker.runner import Worker


def get_file(runtime: Runtime, file_id: int) -> FileRecord:
    with runtime.engine.connect() as conn:
        return files.get_file(conn, file_id)


def get_source(runtime: Runtime, source_id: int) -> Resource:
    with runtime.engine.connect() as conn:
        return resources.get_resource(conn, source_id)


def read_rows(runtime: Runtime, tenant: Tenant, source_id: int) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, source_id)


def placeholder(runtime: Runtime, tenant: Tenant, name: str = "uploads") -> Resource:
    return runtime.sources.create_source(
        workspace_id=tenant.workspace_id, definition=SourceDefinition(name)
    )


def typed(runtime: Runtime, tenant: Tenant, spec: list[tuple[str, ColumnType]]) -> Resource:
    columns = tuple(
        declared_column(n, name, kind, scale=None, timezone=kind is ColumnType.TIMESTAMP)
        for n, (name, kind) in enumerate(spec)
    )
    definition = SourceDefinition("typed", columns=columns)
    return runtime.sources.create_source(workspace_id=tenant.workspace_id, definition=definition)


def uploader(runtime: Runtime, max_bytes: int = 10**6) -> UploadService:
    """The runtime's upload service, with its own file size limit."""
    blobs = BlobStore(runtime.settings.blob_dir)
    return UploadService(runtime.engine, blobs, max_file_bytes=max_bytes, deadline_seconds=60)


def upload(
    runtime: Runtime,
    tenant: Tenant,
    source: Resource,
    body: bytes,
    *,
    kind: str = "csv",
    key: str | None = None,
    max_bytes: int = 10**6,
) -> uploads.AcceptedUpload:
    chunks = [body[i : i + 5] for i in range(0, len(body), 5)]
    service = uploader(runtime, max_bytes)
    staged = service.stage_json(chunks) if kind == "json" else service.stage_csv(chunks)
    return service.queue_upload(
        workspace_id=tenant.workspace_id,
        source_id=source.id,
        staged=staged,
        filename=None,
        idempotency_key=key,
    )


def leftovers(runtime: Runtime) -> list[Path]:
    return sorted(runtime.settings.blob_dir.rglob("*.*"))


def test_a_source_without_columns_is_a_placeholder(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = placeholder(runtime, ingestion_tenant)
    stored = get_source(runtime, source.id)
    assert (stored.name, stored.kind, stored.is_placeholder) == ("uploads", "source", True)
    assert stored.columns == PLACEHOLDER_COLUMNS
    assert read_rows(runtime, ingestion_tenant, source.id) == []


def test_a_typed_source_has_its_declared_columns(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    columns = (
        declared_column(0, "amount", ColumnType.DECIMAL, scale=None, timezone=False),
        declared_column(1, "fee", ColumnType.DECIMAL, scale=4, timezone=False),
        declared_column(2, "at", ColumnType.TIMESTAMP, scale=None, timezone=True),
        declared_column(3, "label", ColumnType.TEXT, scale=7, timezone=True),
    )
    source = runtime.sources.create_source(
        workspace_id=ingestion_tenant.workspace_id,
        definition=SourceDefinition("typed", columns=columns),
    )
    stored = get_source(runtime, source.id)
    assert stored.is_placeholder is False
    assert stored.columns == (
        Column("amount", "c0", ColumnType.DECIMAL, 2),
        Column("fee", "c1", ColumnType.DECIMAL, 4),
        Column("at", "c2", ColumnType.TIMESTAMP, 0, True),
        Column("label", "c3", ColumnType.TEXT, 0, False),
    )
    assert read_rows(runtime, ingestion_tenant, source.id) == []


def test_a_duplicate_name_or_a_foreign_folder_is_rejected(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    placeholder(runtime, ingestion_tenant, "dup")
    typed(runtime, ingestion_tenant, [("a", ColumnType.TEXT)])
    with pytest.raises(DefinitionRejectedError) as caught:
        typed(runtime, ingestion_tenant, [("b", ColumnType.TEXT)])
    assert [p.field for p in caught.value.problems] == ["name"]
    with pytest.raises(DefinitionRejectedError) as caught:
        runtime.sources.create_source(
            workspace_id=ingestion_tenant.workspace_id,
            definition=SourceDefinition("dup", folder_id=999_999),
        )
    assert sorted(p.field for p in caught.value.problems) == ["folder_id", "name"]


def test_the_callback_endpoint_is_stored_with_the_source(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    config = CallbackConfig("https://hooks.example/x", "whsec_abc", ("file.failed",))
    source = runtime.sources.create_source(
        workspace_id=ingestion_tenant.workspace_id,
        definition=SourceDefinition("notified", callback=config),
    )
    with runtime.engine.connect() as conn:
        [endpoint] = webhooks.list_active_endpoints(conn, source.id)
    assert endpoint.url == "https://hooks.example/x"
    assert endpoint.events == ("file.failed",)
    assert endpoint.secret_encrypted is not None
    assert secret_box(runtime.settings).open(endpoint.secret_encrypted) == "whsec_abc"


def test_a_csv_upload_is_queued_with_its_bytes_then_delivered(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = placeholder(runtime, ingestion_tenant)
    body = "id,amount,memo\n1,12345678901234567.89,café\n2,-0.05,日本\n".encode()
    accepted = upload(runtime, ingestion_tenant, source, body)
    assert (accepted.status, accepted.created) == ("queued", True)
    queued = get_file(runtime, accepted.file_id)
    assert (queued.origin, queued.status, queued.bytes) == ("upload", "queued", len(body))
    assert queued.sha256 == hashlib.sha256(body).hexdigest()
    assert queued.blob_path is not None
    assert Path(queued.blob_path).read_bytes() == body
    with runtime.engine.connect() as conn:
        events = outbox.list_events(conn, outbox.STATUS_CALLBACK, source.id)
    assert [(e.type, e.file_id) for e in events] == [("file.accepted", accepted.file_id)]

    assert run_pipeline(runtime) == 1
    done = get_file(runtime, accepted.file_id)
    assert (done.status, done.rows, done.error) == ("delivered", 2, None)
    assert read_rows(runtime, ingestion_tenant, source.id) == [
        {"id": 1, "amount": Decimal("12345678901234567.89"), "memo": "café"},
        {"id": 2, "amount": Decimal("-0.05"), "memo": "日本"},
    ]


def test_an_upload_wakes_an_idle_worker_of_the_same_process(
    runtime: Runtime, ingestion_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that would poll only once an hour still takes an uploaded file: the
    queuing transaction wakes it as it commits (PostgreSQL: NOTIFY; SQLite: the
    listeners of this process, `tally serve`'s own worker). The file comes once the
    thread's first pass has tried its last job, so past its claim of a file: without
    the wake-up it would wait for the hour."""
    source = placeholder(runtime, ingestion_tenant)
    first_pass_done = threading.Event()
    last_job = runtime.catalogue.finish_one_unfinished

    def last_job_then_tell() -> bool:
        try:
            return last_job()
        finally:
            first_pass_done.set()

    monkeypatch.setattr(runtime.catalogue, "finish_one_unfinished", last_job_then_tell)
    idle = Worker(runtime, concurrency=1, poll_seconds=3600)
    idle.start()
    try:
        assert first_pass_done.wait(30), "the worker's first pass to end"
        accepted = upload(runtime, ingestion_tenant, source, b"id,memo\n1,woken\n")
        eventually(
            lambda: get_file(runtime, accepted.file_id).status == "delivered",
            timeout=30,
            what="the idle worker to be woken by the upload",
        )
    finally:
        idle.stop()


def test_json_rows_arrive_exact_flattened_and_in_first_seen_order(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = placeholder(runtime, ingestion_tenant)
    body = (
        b'{"rows": ['
        b'{"id": 1, "total": 0.30000000000000004, "party": {"name": "Zo\xc3\xab", "n": 7}},'
        b'{"id": 2, "total": 0.1, "party": {"name": "\xe6\x9d\xb1"}, "ok": true},'
        b'{"id": 3, "total": 1E+0, "tags": ["a", 0.20], "ok": false}'
        b"]}"
    )
    accepted = upload(runtime, ingestion_tenant, source, body, kind="json")
    run_pipeline(runtime)
    assert get_file(runtime, accepted.file_id).status == "delivered"
    names = [c.name for c in get_source(runtime, source.id).columns]
    assert names == ["id", "total", "party.name", "party.n", "ok", "tags"]
    assert read_rows(runtime, ingestion_tenant, source.id) == [
        {
            "id": 1,
            "total": Decimal("0.30000000000000004"),
            "party.name": "Zoë",
            "party.n": 7,
            "ok": None,
            "tags": None,
        },
        {
            "id": 2,
            "total": Decimal("0.10000000000000000"),
            "party.name": "東",
            "party.n": None,
            "ok": True,
            "tags": None,
        },
        {
            "id": 3,
            "total": Decimal("1.00000000000000000"),
            "party.name": None,
            "party.n": None,
            "ok": False,
            "tags": '["a",0.20]',
        },
    ]


def test_a_typed_source_loads_a_matching_file_in_any_column_order(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = typed(
        runtime,
        ingestion_tenant,
        [("id", ColumnType.INTEGER), ("amount", ColumnType.DECIMAL), ("on", ColumnType.DATE)],
    )
    accepted = upload(runtime, ingestion_tenant, source, b"on,amount,id\n2024-03-01,10.5,1\n,,2\n")
    json_file = upload(
        runtime,
        ingestion_tenant,
        source,
        b'[{"id": 3, "amount": 12345678901234567.89, "on": null}]',
        kind="json",
    )
    run_pipeline(runtime)
    for file_id in (accepted.file_id, json_file.file_id):
        done = get_file(runtime, file_id)
        assert (done.status, done.error) == ("delivered", None)
    assert read_rows(runtime, ingestion_tenant, source.id) == [
        {"id": 1, "amount": Decimal("10.50"), "on": "2024-03-01"},
        {"id": 2, "amount": None, "on": None},
        {"id": 3, "amount": Decimal("12345678901234567.89"), "on": None},
    ]


def test_a_typed_source_fails_a_file_with_other_columns(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = typed(
        runtime, ingestion_tenant, [("id", ColumnType.INTEGER), ("amount", ColumnType.DECIMAL)]
    )
    wrong = upload(runtime, ingestion_tenant, source, b"id,amt\n1,2.00\n")
    not_a_number = upload(runtime, ingestion_tenant, source, b"id,amount\n1,abc\n")
    run_pipeline(runtime)
    failed = get_file(runtime, wrong.file_id)
    assert failed.status == "failed"
    assert failed.error is not None
    assert "missing columns: amount" in failed.error
    assert "unexpected columns: amt" in failed.error
    bad_value = get_file(runtime, not_a_number.file_id)
    assert bad_value.status == "failed"
    assert bad_value.error is not None
    assert "amount" in bad_value.error
    assert read_rows(runtime, ingestion_tenant, source.id) == []
    with runtime.engine.connect() as conn:
        types = [e.type for e in outbox.list_events(conn, outbox.STATUS_CALLBACK, source.id)]
    assert types.count("file.failed") == 2


def test_an_idempotency_key_queues_one_file(runtime: Runtime, ingestion_tenant: Tenant) -> None:
    source = placeholder(runtime, ingestion_tenant)
    first = upload(runtime, ingestion_tenant, source, b"a\n1\n", key="k-1")
    again = upload(runtime, ingestion_tenant, source, b"a\n1\n", key="k-1")
    other = upload(runtime, ingestion_tenant, source, b"a\n3\n", key="k-2")
    assert (again.file_id, again.created) == (first.file_id, False)
    assert other.file_id != first.file_id
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source.id) == 2
        events = outbox.list_events(conn, outbox.STATUS_CALLBACK, source.id)
    assert [e.file_id for e in events] == [first.file_id, other.file_id]
    assert len(leftovers(runtime)) == 2  # the retry's bytes were not kept
    run_pipeline(runtime)
    assert [r["a"] for r in read_rows(runtime, ingestion_tenant, source.id)] == [1, 3]


@pytest.mark.parametrize(
    ("body", "filename", "difference"),
    [
        (b"a\n2\n", None, "with other bytes"),
        (b"a\n1\n", "other.csv", "without a name"),
    ],
)
def test_an_idempotency_key_with_another_file_is_refused(
    runtime: Runtime, ingestion_tenant: Tenant, body: bytes, filename: str | None, difference: str
) -> None:
    source = placeholder(runtime, ingestion_tenant)
    first = upload(runtime, ingestion_tenant, source, b"a\n1\n", key="k-1")
    staged = runtime.uploads.stage_csv([body])
    with pytest.raises(IdempotencyKeyReusedError) as refused:
        runtime.uploads.queue_upload(
            workspace_id=ingestion_tenant.workspace_id,
            source_id=source.id,
            staged=staged,
            filename=filename,
            idempotency_key="k-1",
        )
    assert refused.value.message == (
        f"Idempotency-Key 'k-1' was used with a different request: "
        f"it queued file {first.file_id} {difference}"
    )
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source.id) == 1
    assert len(leftovers(runtime)) == 1  # the refused bytes were not kept


def test_the_same_bytes_twice_are_a_duplicate(runtime: Runtime, ingestion_tenant: Tenant) -> None:
    source = placeholder(runtime, ingestion_tenant)
    first = upload(runtime, ingestion_tenant, source, b"a\n1\n")
    second = upload(runtime, ingestion_tenant, source, b"a\n1\n")
    run_pipeline(runtime)
    assert get_file(runtime, first.file_id).status == "delivered"
    assert get_file(runtime, second.file_id).status == "duplicate"
    assert read_rows(runtime, ingestion_tenant, source.id) == [{"a": 1}]


@pytest.mark.parametrize(
    ("kind", "body", "message"),
    [
        ("csv", b"a\n" + b"1\n" * 60, "the body is larger than the limit of 100 bytes"),
        ("json", b'[{"a": 1}' + b', {"a": 1}' * 20 + b"]", "the body is larger"),
        ("json", b"[" + b",".join(b'{"c%d": 1}' % n for n in range(9)) + b"]", "the CSV"),
    ],
)
def test_too_large_a_body_is_refused_and_nothing_kept(
    runtime: Runtime, kind: str, body: bytes, message: str
) -> None:
    service = uploader(runtime, max_bytes=100)
    stage = service.stage_json if kind == "json" else service.stage_csv
    with pytest.raises(UploadTooLargeError) as caught:
        stage([body[i : i + 10] for i in range(0, len(body), 10)])
    assert message in caught.value.message
    assert leftovers(runtime) == []


@pytest.mark.parametrize(
    ("kind", "body"),
    [("json", b'[{"a": 1}, 2]'), ("json", b"[]"), ("csv", b"")],
)
def test_an_unreadable_body_is_refused_and_nothing_kept(
    runtime: Runtime, kind: str, body: bytes
) -> None:
    service = uploader(runtime, max_bytes=1000)
    stage = service.stage_json if kind == "json" else service.stage_csv
    with pytest.raises(InvalidUploadError):
        stage([body])
    assert leftovers(runtime) == []


def test_a_foreign_source_is_not_found_and_the_bytes_are_dropped(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    stranger = make_tenant(runtime.engine, ingestion=True)
    source = placeholder(runtime, stranger)
    staged = runtime.uploads.stage_csv([b"a\n1\n"])
    with pytest.raises(ResourceNotFoundError):
        runtime.uploads.queue_upload(
            workspace_id=ingestion_tenant.workspace_id,
            source_id=source.id,
            staged=staged,
            filename=None,
            idempotency_key=None,
        )
    assert leftovers(runtime) == []
    with pytest.raises(ResourceNotFoundError):
        runtime.uploads.check_source(
            workspace_id=ingestion_tenant.workspace_id, source_id=source.id
        )


def _receiver(log: RequestLog) -> Any:
    async def accept(request: Request) -> Response:
        await request.body()  # recorded as it is read
        return Response(status_code=204)

    return record_requests(Starlette(routes=[Route("/hook", accept, methods=["POST"])]), log)


def test_uploads_send_the_same_status_callbacks(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    settings = make_settings(request, backend, tmp_path / "home", fetch_allow="127.0.0.1/32")
    runtime = build_runtime(settings)
    log = RequestLog()
    try:
        tenant = make_tenant(runtime.engine, ingestion=True)
        with serve_app(_receiver(log)) as url:
            config = CallbackConfig(f"{url}/hook", None, None)
            source = runtime.sources.create_source(
                workspace_id=tenant.workspace_id,
                definition=SourceDefinition("notified", callback=config),
            )
            accepted = upload(runtime, tenant, source, b'[{"n": 1}]', kind="json")
            run_pipeline(runtime)
            sender = CallbackSender(
                engine=runtime.engine,
                box=secret_box(runtime.settings),
                addresses=address_policy(runtime.settings),
                retry_schedule_seconds=(1.0,),
                timeout_seconds=5,
                lease_seconds=30,
            )
            while sender.fan_out() or sender.send_one(worker="test-worker"):
                pass
    finally:
        runtime.close()
    sent = [json.loads(seen.body) for seen in log.requests]
    assert [(m["type"], m["data"]["file_id"]) for m in sent] == [
        ("file.accepted", accepted.file_id),
        ("file.delivered", accepted.file_id),
    ]
    assert sent[1]["data"]["rows"] == 1
    assert sent[1]["data"]["status"] == "delivered"
