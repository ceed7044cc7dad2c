"""Transformation runs (issue #12) on both backends: the stored row text is what a page
renders; an incremental run equals a full recompute; the data version changes only
with the rows; the time and row limits fail the run and leave the previous output
readable; a worker refreshes a transformation after rows reach its input, and its
readers after it (dependency order)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from support.databases import make_settings
from support.derived_runs import quick_settings, renders_as_stored_text, started_worker
from support.factories import Tenant, append, make_source, read_body, read_data
from support.transformations import (
    FILTER_SQL,
    Inputs,
    make_inputs,
    output,
    preview,
    run,
    transformation,
)
from support.waiting import eventually
from tally.core.errors import RunFailedError
from tally.runtime import Runtime
from tally.settings import Settings
from tally.worker.runner import Worker

UNION_SQL = (
    "SELECT s.payout_id AS ref, s.amount, 'settlement' AS side FROM s WHERE s.amount > 0 "
    "UNION ALL SELECT b.reference, b.amount, 'bank' FROM b"
)


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return quick_settings(request, backend, tmp_path, max_attempts=1)


@pytest.fixture
def inputs(runtime: Runtime, tenant: Tenant) -> Inputs:
    return make_inputs(runtime.engine, tenant)


@pytest.fixture
def worker(runtime: Runtime) -> Iterator[Worker]:
    with started_worker(runtime) as running:
        yield running


def create(runtime: Runtime, tenant: Tenant, body: dict[str, Any]) -> int:
    return runtime.transformations.create(workspace_id=tenant.workspace_id, body=body).id


def rows(runtime: Runtime, tenant: Tenant, derived_id: int) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, output(runtime, derived_id).id)


def test_an_output_keeps_no_row_text_and_its_pages_read_as_stored_text_would(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    sql = (
        'SELECT s.payout_id AS "bank.ref", s.amount AS "a%b", s.amount > 0 AS positive, '
        "CAST(s.txn_date AS TIMESTAMP) AS at, NULL AS nothing, "
        "ROUND(s.amount / 3, 4) AS third FROM s ORDER BY s.amount"
    )
    derived_id = create(runtime, tenant, transformation(inputs, sql=sql))
    run(runtime, derived_id)
    table = output(runtime, derived_id)
    renders_as_stored_text(runtime, table, lambda: [read_body(runtime, tenant, table.id)])
    first = rows(runtime, tenant, derived_id)[0]
    assert (first["bank.ref"], first["positive"]) == ("PO-2", False)
    assert (table.rendered_version, table.indexed_version) == (table.data_version,) * 2


def test_an_incremental_run_equals_a_full_recompute(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    body = transformation(inputs, sql=UNION_SQL, inputs={"s": inputs.settlements, "b": inputs.bank})
    derived_id = create(runtime, tenant, body)
    assert run(runtime, derived_id)["incremental"] is False  # the first run is full
    append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
           "PO-4,EUR,7.25,settled,2024-02-01\nPO-5,EUR,-1.00,settled,2024-02-02\n")  # fmt: skip
    append(runtime, inputs.bank, "reference,amount,booked\nPO-4,7.25,2024-02-03\n")
    last_run = run(runtime, derived_id)
    assert (last_run["incremental"], last_run["rows"]) == (True, 8)
    append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
           "PO-6,USD,0.001,void,2024-02-04\n")  # fmt: skip
    assert run(runtime, derived_id)["incremental"] is True
    full = create(runtime, tenant, {**body, "name": "full"})
    assert run(runtime, full)["incremental"] is False
    key = repr  # no ORDER BY: the same rows, in any order
    assert sorted(rows(runtime, tenant, derived_id), key=key) == sorted(
        rows(runtime, tenant, full), key=key
    )
    assert len(rows(runtime, tenant, full)) == 9
    grouped = create(runtime, tenant, transformation(inputs, name="grouped"))  # not incremental
    run(runtime, grouped)
    append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
           "PO-1,EUR,1.00,settled,2024-02-05\n")  # fmt: skip
    assert run(runtime, grouped)["incremental"] is False


def test_the_data_version_changes_only_with_the_rows(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    derived_id = create(runtime, tenant, transformation(inputs, sql=FILTER_SQL))
    run(runtime, derived_id)
    version = output(runtime, derived_id).data_version
    run(runtime, derived_id)
    assert output(runtime, derived_id).data_version == version
    append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
           "PO-9,EUR,1.00,void,2024-02-01\n")  # fmt: skip
    run(runtime, derived_id)  # the new row is filtered out: the same rows
    assert output(runtime, derived_id).data_version == version
    append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
           "PO-9,EUR,1.00,settled,2024-02-01\n")  # fmt: skip
    run(runtime, derived_id)
    assert output(runtime, derived_id).data_version == version + 1
    assert len(rows(runtime, tenant, derived_id)) == 5


def test_a_recompute_publishes_only_rows_that_differ_from_the_published_ones(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    """A query that is not incremental is recomputed whole, then compared with the
    published output row by row: as many rows, each equal (NULL only to NULL), and
    nothing is published."""
    sql = (
        "SELECT s.payout_id, SUM(s.amount) AS amount, MAX(b.amount) AS banked FROM s "
        "LEFT JOIN b ON b.reference = s.payout_id WHERE s.status = 'settled' "
        "GROUP BY s.payout_id ORDER BY s.payout_id"
    )
    bound = {"s": inputs.settlements, "b": inputs.bank}
    derived_id = create(runtime, tenant, transformation(inputs, sql=sql, inputs=bound))
    assert run(runtime, derived_id)["incremental"] is False
    version = output(runtime, derived_id).data_version
    header = "payout_id,currency,amount,status,txn_date\n"
    steps = [
        (inputs.settlements, header + "PO-1,EUR,1.00,void,2024-02-01\n", 0),  # filtered out
        (inputs.bank, "reference,amount,booked\nPO-4,1.00,2024-02-02\n", 0),  # joins nothing
        (inputs.settlements, header + "PO-1,EUR,0.00,settled,2024-02-01\n", 0),  # adds 0.00
        (inputs.settlements, header + "PO-1,EUR,1.00,settled,2024-02-01\n", 1),  # a sum
        (inputs.bank, "reference,amount,booked\nPO-3,7.00,2024-02-03\n", 1),  # NULL to 7.00
    ]
    for source, text, bumped in steps:
        append(runtime, source, text)
        last_run = run(runtime, derived_id)
        assert last_run["incremental"] is False
        version += bumped
        assert output(runtime, derived_id).data_version == version, text
    assert [
        (r["payout_id"], r["amount"], r["banked"]) for r in rows(runtime, tenant, derived_id)
    ] == [
        ("PO-1", Decimal("11.115"), Decimal("10.12")),
        ("PO-2", Decimal("-5.500"), Decimal("-5.50")),
        ("PO-3", Decimal("1000000.001"), Decimal("7.00")),
    ]


def limited(request: pytest.FixtureRequest, backend: str, tmp_path: Path, **limits: Any) -> Runtime:
    from tally.runtime import build_runtime

    return build_runtime(
        make_settings(request, backend, tmp_path / "limited", derived_max_attempts=1, **limits)
    )


@pytest.mark.parametrize(
    ("limits", "heavy", "message"),
    [
        (
            {"transformation_timeout_seconds": 0.3},
            "SELECT COUNT(*) AS n FROM s, s AS a, s AS b, s AS c",
            "the query ran longer than 0.3 s (TALLY_TRANSFORMATION_TIMEOUT_SECONDS): it was "
            "stopped, the previous output stays readable",
        ),
        (
            {"transformation_max_rows": 150},
            "SELECT s.n FROM s UNION ALL SELECT s.n FROM s",
            "the query gives more than 150 rows (TALLY_TRANSFORMATION_MAX_ROWS): the previous "
            "output stays readable",
        ),
    ],
)
def test_a_run_past_a_limit_fails_and_the_previous_output_stays_readable(
    request: pytest.FixtureRequest,
    backend: str,
    tmp_path: Path,
    limits: dict[str, Any],
    heavy: str,
    message: str,
) -> None:
    from support.factories import make_tenant

    runtime = limited(request, backend, tmp_path, **limits)
    try:
        tenant = make_tenant(runtime.engine)
        numbers = "n\n" + "".join(f"{n}\n" for n in range(100))
        source = make_source(runtime.engine, tenant, numbers, name="numbers")
        body = {"name": "t", "inputs": {"s": source.id}, "sql": "SELECT s.n FROM s WHERE s.n < 3"}
        derived_id = create(runtime, tenant, body)
        run(runtime, derived_id)
        before = rows(runtime, tenant, derived_id)
        assert before == [{"n": 0}, {"n": 1}, {"n": 2}]
        runtime.transformations.replace(
            workspace_id=tenant.workspace_id,
            derived_id=derived_id,
            body={**body, "sql": heavy},
        )
        with pytest.raises(RunFailedError) as failed:
            run(runtime, derived_id)
        assert failed.value.message == message
        assert rows(runtime, tenant, derived_id) == before
        shown = runtime.transformations.get(workspace_id=tenant.workspace_id, derived_id=derived_id)
        assert (shown.state, shown.error) == ("failed", message)
        with runtime.engine.connect() as conn:  # no staged table left behind
            staged = f"r_{shown.resource_id}_next"
            assert not conn.dialect.has_table(conn, staged)
    finally:
        runtime.close()


def test_a_worker_refreshes_after_rows_reach_an_input_and_then_its_readers(
    runtime: Runtime, tenant: Tenant, inputs: Inputs, worker: Worker
) -> None:
    first = create(runtime, tenant, transformation(inputs, sql=FILTER_SQL))
    run(runtime, first)
    second_body = {
        "name": "EUR only",
        "inputs": {"f": output(runtime, first).id},
        "sql": "SELECT f.payout_id, f.twice FROM f WHERE f.payout_id <> 'PO-2'",
    }
    second = create(runtime, tenant, second_body)
    run(runtime, second)
    versions = (output(runtime, first).data_version, output(runtime, second).data_version)
    for n in range(3):  # a burst
        append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
               f"PO-{10 + n},EUR,1.00,settled,2024-02-01\n")  # fmt: skip
    worker.start()
    eventually(
        lambda: len(rows(runtime, tenant, second)) == 6,
        timeout=60,
        what="the transformation and then its reader to refresh by themselves",
    )
    eventually(
        lambda: (
            runtime.transformations.get(workspace_id=tenant.workspace_id, derived_id=second).state
            == "idle"
        ),
        timeout=60,
        what="the reader to be idle",
    )
    assert output(runtime, first).data_version == versions[0] + 1  # once per burst
    assert output(runtime, second).data_version == versions[1] + 1


def test_a_thread_that_queues_runs_wakes_the_idle_threads(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    """The thread that delivered a file queues its readers' runs, then goes on
    finishing the delivered rows; an idle thread must wake to run them when they fall
    due, not a whole poll later."""
    derived_id = create(runtime, tenant, transformation(inputs, sql=FILTER_SQL))
    run(runtime, derived_id)
    idle = Worker(runtime, concurrency=2, poll_seconds=60)  # not started: one round
    assert idle.queue_derived_runs() is False
    assert not idle.is_woken()
    assert idle.idle_seconds() == 60  # nothing queued: a whole poll
    append(runtime, inputs.settlements, "payout_id,currency,amount,status,txn_date\n"
           "PO-9,EUR,1.00,settled,2024-02-01\n")  # fmt: skip
    assert idle.queue_derived_runs() is True
    assert idle.is_woken()
    # Until the run falls due, at most a burst: the wait only shrinks as time passes,
    # so a slow machine cannot make this fail (the poll, 60 s, would).
    assert idle.idle_seconds() <= runtime.derived.policy.burst_seconds + 0.01


def test_a_delivery_queues_its_readers_runs_before_its_rows_are_finished(
    runtime: Runtime, tenant: Tenant, inputs: Inputs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The burst starts when the delivered rows are committed: the delivering thread
    queues the readers' runs before it stores the rows' JSON text (which takes a while
    for a large file), not after."""
    derived_id = create(runtime, tenant, transformation(inputs, sql=FILTER_SQL))
    run(runtime, derived_id)
    csv = b"payout_id,currency,amount,status,txn_date\nPO-9,EUR,1.00,settled,2024-02-01\n"
    runtime.uploads.queue_upload(
        workspace_id=tenant.workspace_id,
        source_id=inputs.settlements,
        staged=runtime.uploads.stage_csv([csv]),
        filename=None,
        idempotency_key=None,
    )
    states: list[str] = []
    finish = runtime.catalogue.finish_resource

    def finishing(resource_id: int) -> None:  # the real one, once the state is seen
        states.append(
            runtime.transformations.get(
                workspace_id=tenant.workspace_id, derived_id=derived_id
            ).state
        )
        finish(resource_id)

    monkeypatch.setattr(runtime.catalogue, "finish_resource", finishing)
    one_thread = Worker(runtime, concurrency=1, poll_seconds=60)  # not started: one job
    assert one_thread.deliver_one("w") is True
    assert states == ["queued"]
    assert one_thread.is_woken()  # an idle thread is told when the run falls due


def test_an_incremental_run_past_the_row_limit_fails_and_the_output_stays(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    from support.factories import make_tenant

    runtime = limited(request, backend, tmp_path, transformation_max_rows=120)
    try:
        tenant = make_tenant(runtime.engine)
        numbers = "n\n" + "".join(f"{n}\n" for n in range(100))
        source = make_source(runtime.engine, tenant, numbers, name="numbers")
        body = {"name": "t", "inputs": {"s": source.id}, "sql": "SELECT s.n FROM s"}
        derived_id = create(runtime, tenant, body)
        run(runtime, derived_id)
        append(runtime, source.id, "n\n" + "".join(f"{n}\n" for n in range(100, 130)))
        with pytest.raises(RunFailedError, match="more than 120 rows"):
            run(runtime, derived_id)
        assert len(read_data(runtime, tenant, output(runtime, derived_id).id)) == 100
    finally:
        runtime.close()


def test_what_a_page_answers_at_the_swap_it_answers_after_the_indexes(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    """A whole run publishes its rows, then indexes them: what a page answers at the
    swap is what it answers after, and no row is given JSON text on the way."""
    derived_id = create(runtime, tenant, transformation(inputs, sql=FILTER_SQL))
    table = output(runtime, derived_id)
    seen: list[tuple[int, str]] = []

    class AtTheSwap(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() == "derived_output_readable":
                with runtime.engine.connect() as conn:
                    unset = f"SELECT count(*) FROM {table.table_name} WHERE _json IS NULL"
                    seen.append((conn.exec_driver_sql(unset).scalar_one(), ""))
                seen[-1] = (seen[-1][0], read_body(runtime, tenant, table.id))

    logger, handler = logging.getLogger("tally.derived"), AtTheSwap()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        run(runtime, derived_id)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    [(unset, body)] = seen
    assert unset == 4  # every row of the published output
    assert body == read_body(runtime, tenant, table.id)
    finished = output(runtime, derived_id)
    assert finished.rendered_version == finished.indexed_version == finished.data_version
    with runtime.engine.connect() as conn:
        unset = f"SELECT count(*) FROM {table.table_name} WHERE _json IS NULL"
        assert conn.exec_driver_sql(unset).scalar_one() == 4


def test_a_run_after_one_stopped_past_its_swap_finishes_the_output(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    """A worker killed between the swap and the end leaves no indexes: the next run
    builds them, whether it finds nothing new (the same rows, the same data version)
    or appends new rows in place."""
    derived_id = create(runtime, tenant, transformation(inputs, sql=FILTER_SQL))
    run(runtime, derived_id)
    for new_rows in ("", "PO-9,EUR,1.25,settled,2024-02-01\n"):
        table = output(runtime, derived_id)
        with runtime.engine.begin() as conn:
            conn.exec_driver_sql(f"UPDATE resources SET indexed_version = 0 WHERE id = {table.id}")
        if new_rows:
            append(
                runtime,
                inputs.settlements,
                "payout_id,currency,amount,status,txn_date\n" + new_rows,
            )
        assert run(runtime, derived_id)["incremental"] is True
        after = output(runtime, derived_id)
        assert after.data_version == table.data_version + (1 if new_rows else 0)
        assert after.row_count == table.row_count + (1 if new_rows else 0)
        assert (after.rendered_version, after.indexed_version) == (after.data_version,) * 2


def test_a_value_past_int64_fails_a_run_and_a_preview_in_tallys_words(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Issue #30: the run's error was `OperationalError('(sqlite3.OperationalError)
    user-defined function raised exception')` on SQLite, "bigint out of range" on
    PostgreSQL; both now say what sql_functions says."""
    source = make_source(runtime.engine, tenant, "a\n92233720368547758.07\n", name="big")
    body = {"name": "square", "inputs": {"s": source.id}, "sql": "SELECT s.a * s.a AS sq FROM s"}
    said = "the query failed: a value exceeds 64-bit integers"
    with pytest.raises(RunFailedError) as previewed:
        preview(runtime, workspace_id=tenant.workspace_id, body=body)
    assert previewed.value.message.startswith(said)
    derived_id = create(runtime, tenant, body)
    with pytest.raises(RunFailedError) as failed:
        run(runtime, derived_id)
    assert failed.value.message.startswith(said)
    shown = runtime.transformations.get(workspace_id=tenant.workspace_id, derived_id=derived_id)
    assert shown.error is not None
    assert shown.error.startswith(said)
