"""Column snapshots (decision 0014) over their life: built per data version, only for
large enough resources, within the memory budget, never answering for a version they do
not hold. What they answer is checked against the reference model in
tests/property/test_query_semantics.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from support.databases import make_settings
from support.factories import Tenant, append, make_source, make_tenant, read_envelope
from tally.core.columns import Column
from tally.runtime import Runtime, build_runtime, query_process_engine
from tally.services import column_snapshots
from tally.services.column_snapshots import ColumnSnapshots, build_snapshot
from tally.services.workspace_rows import RowsRequest
from tally.storage.resources import Resource, find_resource

# References longer than 15 bytes: numpy keeps those texts outside the array itself.
CSV = "id,currency,amount,booked,reference\n" + "".join(
    f"{n},{'EUR' if n % 3 else 'USD'},{n}.{n % 100:02d},2026-01-{n % 28 + 1:02d},"
    f"invoice-2026-{n % 7:05d}\n"
    for n in range(1, 101)
)
LATE = "id,currency,amount,booked,reference\n102,USD,500.00,2026-02-01,invoice-2026-00009\n"


@pytest.fixture
def snapshot_runtime(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[Runtime]:
    built = build_runtime(
        make_settings(
            request, backend, tmp_path / "home", snapshot_min_rows=50, response_cache=False
        )
    )
    yield built
    built.close()


def current(engine: Engine, resource_id: int) -> Resource:
    with engine.connect() as conn:
        resource = find_resource(conn, resource_id)
    assert resource is not None
    return resource


def ready(snapshots: ColumnSnapshots, resource: Resource) -> bool:
    snapshots.find(resource)
    snapshots.wait()
    return snapshots.find(resource) is not None


def test_a_delivery_is_read_at_once_and_gets_a_snapshot_of_its_own(
    snapshot_runtime: Runtime,
) -> None:
    runtime = snapshot_runtime
    tenant = make_tenant(runtime.engine)
    snapshots = runtime.data_query.snapshots
    assert snapshots is not None
    source = make_source(runtime.engine, tenant, CSV)
    assert ready(snapshots, source)
    filters = [("currency", "USD"), ("amount__gte", "90")]
    before = read_envelope(runtime, tenant, source.id, filters=filters, ordering="-amount")
    assert [r["id"] for r in before["data"]] == [99, 96, 93, 90]

    append(runtime, source.id, LATE)
    after = read_envelope(runtime, tenant, source.id, filters=filters, ordering="-amount")
    # the old version's snapshot does not answer for the new version: SQL does, at once
    assert [r["id"] for r in after["data"]] == [102, 99, 96, 93, 90]
    assert after["meta"]["total_count"] == 5

    newer = current(runtime.engine, source.id)
    assert ready(snapshots, newer)
    again = read_envelope(runtime, tenant, source.id, filters=filters, ordering="-amount")
    assert again == after
    long_texts = [("reference__gte", "invoice-2026-00006"), ("reference__lt", "invoice-2026-1")]
    found = read_envelope(runtime, tenant, source.id, filters=long_texts, ordering="reference")
    assert [r["id"] for r in found["data"]] == [
        6,
        13,
        20,
        27,
        34,
        41,
        48,
        55,
        62,
        69,
        76,
        83,
        90,
        97,
        102,
    ]
    exact = read_envelope(runtime, tenant, source.id, filters=[("reference", "invoice-2026-00009")])
    assert [r["id"] for r in exact["data"]] == [102]
    # the older version's was dropped for it, and is not built again when asked for
    assert snapshots.find(source) is None
    assert not snapshots.building


def test_small_resources_are_answered_by_sql(snapshot_runtime: Runtime) -> None:
    tenant = make_tenant(snapshot_runtime.engine)
    snapshots = snapshot_runtime.data_query.snapshots
    assert snapshots is not None
    small = make_source(snapshot_runtime.engine, tenant, "id,amount\n1,2.50\n2,3.75\n")
    assert not ready(snapshots, small)
    rows = read_envelope(snapshot_runtime, tenant, small.id, filters=[("amount__gt", "3")])
    assert [r["id"] for r in rows["data"]] == [2]


def test_rows_named_one_by_one_start_no_build_and_read_the_same(
    snapshot_runtime: Runtime,
) -> None:
    """A few rows named by id (the workbench's candidates and ticked rows): the index
    finds them; a snapshot, built for that, would cost the whole resource's read."""
    runtime = snapshot_runtime
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    snapshots = runtime.data_query.snapshots
    assert snapshots is not None

    def named(by_indexes: bool) -> list[str]:
        wanted = RowsRequest(
            resource_id=source.id,
            workspace_id=tenant.workspace_id,
            filters=[("id__in", "7,3,99")],
            fields="id,amount",
            ordering="-id",
            page_size=10,
            by_indexes=by_indexes,
        )
        return runtime.data_query.read_rows(wanted).rows

    by_index = named(True)
    assert not snapshots.building
    assert snapshots.find(source) is None  # none yet (and this starts one)
    snapshots.wait()
    assert snapshots.find(source) is not None
    assert named(False) == by_index
    assert [json.loads(r)["id"] for r in by_index] == [99, 7, 3]


def test_a_snapshot_over_the_memory_budget_is_not_kept(runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, CSV)
    whole = build_snapshot(runtime.engine, source)
    assert whole is not None
    tight = ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=whole.nbytes - 1)
    assert not ready(tight, source)
    roomy = ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=whole.nbytes)
    assert ready(roomy, source)


def test_a_build_stops_at_the_column_that_passes_the_budget(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wide resource is not read whole only to be dropped: the build stops at the first
    column that takes it over the budget, and is not tried again for that version."""
    source = make_source(runtime.engine, tenant, CSV)
    whole = build_snapshot(runtime.engine, source)
    assert whole is not None
    first = next(iter(whole.columns.values()))
    read: list[str] = []
    reading = column_snapshots.read_column

    def counted(conn: Any, table: str, column: Column) -> list[Any]:
        read.append(column.physical)
        return reading(conn, table, column)

    monkeypatch.setattr(column_snapshots, "read_column", counted)
    budget = whole.row_ids.nbytes + first.nbytes  # the first column fits, the second not
    with pytest.raises(column_snapshots.OverBudgetError):
        build_snapshot(runtime.engine, source, max_bytes=budget)
    assert len(read) == 2 < len(whole.columns)
    read.clear()
    tight = ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=budget)
    assert not ready(tight, source)
    assert not ready(tight, source)
    assert len(read) == 2  # one build, stopped early; never again for this version


def test_each_build_says_when_it_starts_and_how_it_ended(
    runtime: Runtime, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator sees what a query process's CPU went to, and a benchmark when the
    one-off build is over (bench/tally_target.py waits for the end lines)."""
    source = make_source(runtime.engine, tenant, CSV)
    whole = build_snapshot(runtime.engine, source)
    assert whole is not None
    caplog.set_level("INFO", logger=column_snapshots.__name__)
    assert ready(ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=2**30), source)
    assert not ready(ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=1), source)
    said = [
        (r.getMessage(), r.resource_id, r.data_version)
        for r in caplog.records
        if r.name == column_snapshots.__name__
    ]
    version = source.data_version
    assert said == [
        ("column_snapshot_started", source.id, version),
        ("column_snapshot_built", source.id, version),
        ("column_snapshot_started", source.id, version),
        ("column_snapshot_over_budget", source.id, version),
    ]
    built = next(r for r in caplog.records if r.getMessage() == "column_snapshot_built")
    assert built.mib == round(whole.nbytes / 2**20, 1)
    assert built.seconds >= 0


def test_the_least_recently_used_snapshot_goes_first(runtime: Runtime, tenant: Tenant) -> None:
    first = make_source(runtime.engine, tenant, CSV, name="first")
    second = make_source(runtime.engine, tenant, CSV, name="second")
    third = make_source(runtime.engine, tenant, CSV, name="third")
    one = build_snapshot(runtime.engine, first)
    assert one is not None
    snapshots = ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=2 * one.nbytes)
    assert ready(snapshots, first)
    assert ready(snapshots, second)
    assert snapshots.find(first) is not None  # used: second is now the least recent
    assert ready(snapshots, third)
    assert snapshots.find(first) is not None
    assert snapshots.find(second) is None
    snapshots.wait()


def test_no_snapshot_is_built_for_a_version_that_is_gone(runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, CSV)
    append(runtime, source.id, LATE)
    assert build_snapshot(runtime.engine, source) is None  # `source` is the older version
    newer = current(runtime.engine, source.id)
    snapshot = build_snapshot(runtime.engine, newer)
    assert snapshot is not None
    assert snapshot.data_version == newer.data_version
    assert len(snapshot.row_ids) == 101


def test_snapshots_can_be_turned_off(runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, CSV)
    off = ColumnSnapshots(runtime.engine, min_rows=0, memory_bytes=0)
    assert not off.enabled
    assert not ready(off, source)


def test_builds_take_turns_so_a_query_always_has_a_connection(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A query process's engine has two PostgreSQL connections; a build holds one for
    its whole read. Three builds are started while their tables are locked (each read
    waits, holding its connection when it has one): a query must still get a
    connection at once, not after the builds."""
    runtime = build_runtime(make_settings(request, "postgresql", tmp_path / "home"))
    engine = query_process_engine(runtime.settings)
    try:
        tenant = make_tenant(runtime.engine)
        sources = [make_source(runtime.engine, tenant, CSV, name=f"s{n}") for n in range(3)]
        snapshots = ColumnSnapshots(engine, min_rows=0, memory_bytes=2**30)
        answered = threading.Event()

        def query() -> None:
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            answered.set()

        with runtime.engine.connect() as blocker, blocker.begin():
            for source in sources:
                blocker.exec_driver_sql(f"LOCK TABLE {source.table_name} IN ACCESS EXCLUSIVE MODE")
            for source in sources:
                snapshots.find(source)
            threading.Thread(target=query, daemon=True).start()
            assert answered.wait(10)
        snapshots.wait()
        assert all(snapshots.find(source) is not None for source in sources)
    finally:
        engine.dispose()
        runtime.close()
