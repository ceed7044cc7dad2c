"""The system columns `_row` and `_file_id` (issue #32 point 6): not among a resource's
default fields, named in `fields`, filters and `ordering` like any integer column, the
same whether SQL or a column snapshot answers; a file's rows carry its id whichever way
the file came (a webhook's download, an upload, a load of either backend's paths)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from support.databases import make_settings
from support.factories import (
    Tenant,
    make_source,
    make_tenant,
    read_body,
    read_data,
    read_envelope,
    run_pipeline,
    write_file,
)
from support.servers import file_server_app, serve_app
from support.transformations import run
from tally.core.errors import UnknownFieldError, UnknownFilterFieldError
from tally.core.filters import parse_row_query
from tally.runtime import Runtime, build_runtime
from tally.services.loader.load import load_into
from tally.services.notification_intake import Notification
from tally.services.sources import SourceDefinition
from tally.services.webhooks import WebhookDefinition
from tally.storage.engine import write_connection
from tally.storage.resource_tables import pages
from tally.storage.resources import Resource, find_resource


def rows_csv(first: int, count: int) -> bytes:
    lines = [
        f"{n},{'EUR' if n % 3 else 'USD'},{n % 17}.{n % 100:02d}"
        for n in range(first, first + count)
    ]
    return ("id,currency,amount\n" + "\n".join(lines) + "\n").encode()


A, B = rows_csv(1, 40), rows_csv(41, 30)


@pytest.fixture(params=["sql", "snapshot"])
def answering(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[Runtime, bool]]:
    """A runtime without response cache whose filtered reads are answered by SQL, or
    by column snapshots (built for every resource of 10 rows or more)."""
    snapshot = request.param == "snapshot"
    runtime = build_runtime(
        make_settings(
            request,
            backend,
            tmp_path / "home",
            response_cache=False,
            snapshot_min_rows=10 if snapshot else 10**9,
            fetch_allow="127.0.0.0/8",
        )
    )
    yield runtime, snapshot
    runtime.close()


def upload(runtime: Runtime, tenant: Tenant, source: Resource, body: bytes) -> int:
    staged = runtime.uploads.stage_csv([body])
    return runtime.uploads.queue_upload(
        workspace_id=tenant.workspace_id,
        source_id=source.id,
        staged=staged,
        filename=None,
        idempotency_key=None,
    ).file_id


def ready(runtime: Runtime, resource_id: int) -> None:
    """The resource's snapshot at its current data version built, if snapshots answer."""
    snapshots = runtime.data_query.snapshots
    assert snapshots is not None
    with runtime.engine.connect() as conn:
        resource = find_resource(conn, resource_id)
    assert resource is not None
    snapshots.find(resource)
    snapshots.wait()
    assert snapshots.find(resource) is not None


def test_rows_show_their_row_and_file_through_every_query_form(
    answering: tuple[Runtime, bool],
) -> None:
    runtime, snapshot = answering
    tenant = make_tenant(runtime.engine, ingestion=True)
    source = runtime.sources.create_source(
        workspace_id=tenant.workspace_id, definition=SourceDefinition("statements")
    )
    first, second = upload(runtime, tenant, source, A), upload(runtime, tenant, source, B)
    run_pipeline(runtime)
    runtime.catalogue.finish_one_unfinished()  # its indexes, `_file_id`'s among them
    if snapshot:
        ready(runtime, source.id)

    plain = read_data(runtime, tenant, source.id)
    assert set(plain[0]) == {"id", "currency", "amount"}  # the default fields: unchanged
    every = read_data(runtime, tenant, source.id, fields="id,_row,_file_id")
    assert [r["id"] for r in every] == list(range(1, 71))
    assert [r["_file_id"] for r in every] == [first] * 40 + [second] * 30
    ids = [r["_row"] for r in every]
    assert ids == sorted(set(ids))  # unique, increasing in insertion order
    row_of = {r["id"]: r["_row"] for r in every}

    def ids_of(**query: Any) -> list[int]:
        return [r["id"] for r in read_data(runtime, tenant, source.id, fields="id", **query)]

    assert ids_of(filters=[("_file_id", str(second))]) == list(range(41, 71))
    assert ids_of(filters=[("_file_id__in", f"{first},999")], page_size=5) == [1, 2, 3, 4, 5]
    assert ids_of(filters=[("_row__gt", str(row_of[65]))]) == [66, 67, 68, 69, 70]
    assert ids_of(filters=[("_row__lte", str(row_of[3])), ("currency", "USD")]) == [3]
    assert ids_of(filters=[("_row", str(row_of[7]))]) == [7]
    assert ids_of(filters=[("_row__in", f"{row_of[9]},{row_of[2]}")]) == [2, 9]
    assert ids_of(filters=[("_file_id", "")]) == []  # every row came from a file
    assert ids_of(ordering="-_row", page_size=3) == [70, 69, 68]
    assert ids_of(ordering="_row", page_size=3) == [1, 2, 3]
    # Ties by insertion order, in the ordering's direction.
    assert ids_of(ordering="-_file_id", page_size=3) == [70, 69, 68]
    assert ids_of(ordering="_file_id", page=2, page_size=39) == [40, *range(41, 71)][:39]
    assert ids_of(filters=[("currency", "USD")], ordering="-_file_id", page_size=2) == [69, 66]
    envelope = read_envelope(runtime, tenant, source.id, filters=[("_file_id__gte", str(second))])
    assert envelope["meta"]["total_count"] == 30

    # Paging in the order the spec asks for (a unique column), by `_row`, with a filter:
    # page after page seeks from the key where the page before ended.
    for ordering, expected in [("_row", list(range(1, 71))), ("-_row", list(range(70, 0, -1)))]:
        for filters in [[], [("currency", "EUR")]]:
            wanted = [i for i in expected if not filters or i % 3]
            pages = [
                ids_of(filters=filters, ordering=ordering, page=page, page_size=7)
                for page in range(1, 12)
            ]
            assert [i for page in pages for i in page] == wanted


def test_fields_filters_and_ordering_name_no_file_id_of_a_derived_output(
    runtime: Runtime,
) -> None:
    """A derived output's rows come from no file: `_file_id` is an unknown column there,
    400 like any other; `_row` answers."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    source = make_source(runtime.engine, tenant, "id,amount\n1,2.50\n2,3.00\n")
    sql = "SELECT s.id, s.amount * 2 AS twice FROM s"
    created = runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={"name": "doubled", "inputs": {"s": source.id}, "sql": sql},
    )
    run(runtime, created.id)
    output = created.resource_id
    rows = read_data(runtime, tenant, output, fields="id,_row", ordering="-_row")
    assert [r["id"] for r in rows] == [2, 1]
    with pytest.raises(UnknownFieldError):
        read_body(runtime, tenant, output, fields="id,_file_id")
    with pytest.raises(UnknownFilterFieldError):
        read_body(runtime, tenant, output, filters=[("_file_id", "1")])


def test_a_column_of_the_resource_named_like_a_system_column_keeps_its_name(
    runtime: Runtime,
) -> None:
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, "_row,_file_id,x\nr1,f1,1\nr2,f2,2\n")
    assert read_data(runtime, tenant, source.id, filters=[("_row", "r2")]) == [
        {"_row": "r2", "_file_id": "f2", "x": 2}
    ]
    assert [r["x"] for r in read_data(runtime, tenant, source.id, ordering="-_file_id")] == [2, 1]


def test_a_webhooks_downloads_and_an_admin_load_give_their_rows_file_ids(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """The first file of a placeholder and a later one (SQLite: staged, filled then
    appended; PostgreSQL: COPY straight in), each row with its file's id; rows of
    `tally admin load --append` (no file record) have none."""
    runtime = build_runtime(
        make_settings(request, backend, tmp_path / "home", fetch_allow="127.0.0.0/8")
    )
    try:
        tenant = make_tenant(runtime.engine, ingestion=True)
        webhook = runtime.webhooks.register(
            workspace_id=tenant.workspace_id, definition=WebhookDefinition(name="bank")
        )
        with serve_app(file_server_app({"a.csv": A, "b.csv": B})) as url:
            ids = [
                runtime.intake.submit(
                    Notification(webhook.webhook_id, {"file_url": f"{url}/files/{name}"}, None)
                )
                .result(timeout=30)
                .file_id
                for name in ("a.csv", "b.csv")
            ]
            assert run_pipeline(runtime) == 2
        path = write_file(rows_csv(71, 2))
        try:
            runtime.catalogue.append_file(webhook.source.id, path)
        finally:
            path.unlink()
        rows = read_data(runtime, tenant, webhook.source.id, fields="id,_file_id")
        assert [r["_file_id"] for r in rows] == [ids[0]] * 40 + [ids[1]] * 30 + [None] * 2
    finally:
        runtime.close()


@pytest.mark.parametrize("declared", [False, True])
def test_a_load_under_the_lock_gives_its_rows_the_file_id(runtime: Runtime, declared: bool) -> None:
    """`load_into` with a file id: SQLite's INSERTs (a file loaded under the lock after
    its stagings were outdated), PostgreSQL's COPY into a new table or a typed one."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    source = (
        make_source(runtime.engine, tenant, A)
        if declared
        else runtime.sources.create_source(
            workspace_id=tenant.workspace_id, definition=SourceDefinition("placeholder")
        )
    )
    path = write_file(B)
    try:
        with write_connection(runtime.engine) as conn, conn.begin():
            load_into(conn, source.id, path, file_id=4242)
    finally:
        path.unlink()
    rows = read_data(
        runtime, tenant, source.id, fields="id,_file_id", filters=[("_file_id", "4242")]
    )
    assert [r["id"] for r in rows] == list(range(41, 71))


def test_a_row_range_bounds_a_scan_in_row_order(runtime: Runtime) -> None:
    """SQLite reads a broad filter's page by walking the table in row order (`+col`
    keeps it off the column's index); a `_row` range stays a range of that walk, so a
    client paging by `_row__gt=<last seen>` never walks the rows before it."""
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, A)
    last = read_data(runtime, tenant, source.id, fields="_row")[-1]["_row"]
    query = parse_row_query(
        source.columns,
        [("_row__gt", str(last - 5)), ("currency", "EUR")],
        fields="id",
        ordering=None,
        page=1,
        page_size=3,
        system=source.system_columns,
    )
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    sa.event.listen(runtime.engine, "before_cursor_execute", record)
    try:
        with runtime.engine.connect() as conn:
            page = pages.select_page(
                conn,
                source.table_name,
                source.columns,
                query,
                offset=0,
                limit=3,
                matching=3,
                scan_in_row_order=True,
            )
    finally:
        sa.event.remove(runtime.engine, "before_cursor_execute", record)
    assert [json.loads(row)["id"] for row in page.rows] == [37, 38, 40]
    assert not any("+_row_id" in statement for statement in seen)
    if runtime.engine.dialect.name == "sqlite":  # the walk in row order was taken
        assert any("+c1" in statement for statement in seen)
