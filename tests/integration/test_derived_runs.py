"""Runs of derived resources (decision 0016), on both backends, through a
reconciliation: the output published whole and read through the Data API like a
source, its data version kept when nothing changed, runs queued by the rows reaching
an input (once per burst) and run by a real worker, bounded attempts, leases, and the
same output whatever order the files came in."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from support.awkward import AWKWARD
from support.derived_runs import quick_settings, renders_as_stored_text, started_worker
from support.factories import Tenant, append, make_source, read_body
from support.reconciliation_cases import split
from support.reconciliation_runs import (
    BANK_CSV,
    LEDGER_CSV,
    bank_and_ledger,
    definition_json,
    derived,
    make_reconciliation,
    output_resource,
    output_rows,
)
from support.waiting import eventually
from tally.core.clock import as_utc, utc_now
from tally.core.errors import RunFailedError
from tally.runtime import Runtime
from tally.services.derived.phases import STALLED, STARTING, RunUnderWay
from tally.services.reconciliation.service import ReconciliationService
from tally.settings import Settings
from tally.storage import outbox
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import plans as derived_plans
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import write_connection
from tally.storage.resource_tables.row_json import store_row_json
from tally.storage.schema import derived_resources as derived_resources_table
from tally.storage.schema import outbox_events
from tally.worker.runner import Worker

RECONCILIATION = "reconciliation"
OUTPUT_QUERIES: tuple[dict[str, Any], ...] = (
    {},
    {"ordering": "-bank.amount"},
    {"ordering": "ledger.at", "page": 2, "page_size": 2},
    {"filters": [("bank.flag", "true")]},
    {"filters": [("status", "unmatched")]},
)


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return quick_settings(request, backend, tmp_path, max_attempts=2)


@pytest.fixture
def worker(runtime: Runtime) -> Iterator[Worker]:
    with started_worker(runtime) as running:
        yield running


def pending_change_times(runtime: Runtime) -> list[dt.datetime]:
    """When the changes not yet turned into runs happened (their outbox events' times)."""
    with runtime.engine.connect() as conn:
        rows = conn.execute(
            sa.select(outbox_events.c.created_at).where(
                outbox_events.c.topic == outbox.INPUT_CHANGED,
                outbox_events.c.processed_at.is_(None),
            )
        )
        return [as_utc(moment) for moment in rows.scalars()]


def run_now(runtime: Runtime, record: DerivedRecord) -> DerivedRecord:
    return runtime.derived.run_now(record.id, kind=RECONCILIATION, worker="test")


def reconciled(runtime: Runtime, tenant: Tenant) -> DerivedRecord:
    left, right = bank_and_ledger(runtime, tenant)
    return make_reconciliation(runtime.engine, tenant, definition_json(left, right))


# --- the output ---------------------------------------------------------------------------


def test_a_run_publishes_the_output_the_data_api_reads(runtime: Runtime, tenant: Tenant) -> None:
    record = reconciled(runtime, tenant)
    last_run = run_now(runtime, record).last_run
    assert last_run is not None

    rows = output_rows(runtime, tenant, record)
    assert list(rows[0]) == [
        "match_id", "status", "pass", "difference", "reason",
        "bank._row", "bank.reference", "bank.amount", "bank.txn_date", "bank.memo",
        "ledger._row", "ledger.reference", "ledger.amount", "ledger.txn_date", "ledger.account",
    ]  # fmt: skip
    pairs = [(r["bank._row"], r["ledger._row"], r["status"]) for r in rows]
    assert pairs == [
        (1, 2, "matched"),
        (2, 1, "matched"),
        (3, 3, "matched"),  # one bank row, two ledger rows: one row per pair
        (3, 4, "matched"),
        (4, None, "unmatched"),
        (None, 5, "unmatched"),
    ]
    assert [r["match_id"] for r in rows] == [1, 2, 3, 3, None, None]
    assert rows[0]["bank.amount"] == Decimal("100.00")
    assert rows[2]["pass"] == "split payments"
    assert last_run["counts"] == {
        "matched": 3,
        "matched_with_difference": 0,
        "suggested": 0,
        "manual": 0,
        "unmatched_left": 1,
        "unmatched_right": 1,
        "resolved_left": 0,
        "resolved_right": 0,
    }
    assert last_run["amounts"] == {
        "left": {
            "matched": "135.50",
            "unmatched": "99.99",
            "resolved": "0.00",
            "matched_by_status": split(matched="135.50"),
        },
        "right": {
            "matched": "135.50",
            "unmatched": "1.00",
            "resolved": "0.00",
            "matched_by_status": split(matched="135.50"),
        },
    }
    assert output_resource(runtime, record).row_count == 6


def test_the_output_answers_dotted_filters_status_and_ordering(
    runtime: Runtime, tenant: Tenant
) -> None:
    bank = BANK_CSV + "REF-5,100.07,2024-01-09,near\n"
    ledger = LEDGER_CSV + "REF-5,100.00,2024-01-09,5000\n"
    left, right = bank_and_ledger(runtime, tenant, bank, ledger)
    passes = [
        {
            "name": "near",
            "type": "one_to_one",
            "keys": [{"left": "reference", "right": "reference"}],
            "amount_tolerance": "0.10",
        }
    ]
    record = make_reconciliation(
        runtime.engine, tenant, definition_json(left, right, passes=passes)
    )
    run_now(runtime, record)

    big = output_rows(runtime, tenant, record, filters=[("bank.amount__gte", "100")])
    assert sorted(r["bank.amount"] for r in big) == [Decimal("100.00"), Decimal("100.07")]
    unmatched = output_rows(runtime, tenant, record, filters=[("status", "unmatched")])
    assert {r["status"] for r in unmatched} == {"unmatched"}
    assert len(unmatched) == 5  # REF-3 (the split is not this pass's), REF-4, REF-9
    ordered = output_rows(runtime, tenant, record, ordering="-difference")
    differences = [r["difference"] for r in ordered if r["difference"] is not None]
    assert differences[0] == Decimal("0.07")  # exact, at the run's scale
    assert str(differences[0]) == "0.07"
    [near] = [r for r in ordered if r["bank.reference"] == "REF-5"]
    assert (near["status"], near["ledger._row"]) == ("matched_with_difference", 6)


def test_an_output_keeps_no_row_text_and_its_pages_read_as_stored_text_would(
    runtime: Runtime, tenant: Tenant
) -> None:
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    output = output_resource(runtime, record)
    renders_as_stored_text(runtime, output, lambda: [read_body(runtime, tenant, output.id)])
    assert (output.rendered_version, output.indexed_version) == (output.data_version,) * 2


def output_indexes(runtime: Runtime, table: str) -> dict[str, str]:
    """The table's indexes by name, each with its definition as the catalogue keeps it."""
    with runtime.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            found = conn.exec_driver_sql(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (table,)
            )
        else:
            found = conn.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?",
                (table,),
            )
        return {name: sql or "" for name, sql in found}


def test_each_sides_open_rows_have_indexes_of_their_own(runtime: Runtime, tenant: Tenant) -> None:
    """The Exceptions view reads one side's open rows ordered or filtered by position,
    date or amount: a partial index of each holds those rows only, and the planner
    takes it for the view's query; the rows are the ones a scan finds."""
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    output = output_resource(runtime, record)
    physical = {c.name: c.physical for c in output.columns}
    partial = {
        name: sql
        for name, sql in output_indexes(runtime, output.table_name).items()
        if "WHERE" in sql
    }
    expected = set()
    for side in ("bank", "ledger"):
        present = physical[f"{side}._row"]
        for name in ("txn_date", "amount"):
            expected.add(
                f"ix_{output.table_name}_v{output.data_version}_"
                f"{physical[f'{side}.{name}']}_when_{present}"
            )
    assert set(partial) == expected
    for sql in partial.values():
        assert f"{physical['status']} = 'unmatched'" in sql
        assert "IS NOT NULL" in sql

    status, row, date = physical["status"], physical["ledger._row"], physical["ledger.txn_date"]
    query = (
        f"SELECT _row_id FROM {output.table_name} WHERE {status} = :status AND {row} >= :first "
        f"ORDER BY {date}, _row_id LIMIT 50"
    )
    with runtime.engine.connect() as conn:
        postgresql = conn.dialect.name == "postgresql"
        if postgresql:  # a handful of rows: a scan would be cheaper, so ask for an index
            conn.exec_driver_sql("SET enable_seqscan = off")
        explain = "EXPLAIN" if postgresql else "EXPLAIN QUERY PLAN"
        bound = {"status": "unmatched", "first": 1}
        plan = " ".join(
            str(line[-1]) for line in conn.execute(sa.text(f"{explain} {query}"), bound)
        )
        # (on a handful of rows PostgreSQL may take the position's and sort them)
        assert re.search(rf"_when_{row}\b", plan), plan
        found = conn.execute(sa.text(query), bound).scalars().all()
    unmatched = output_rows(
        runtime, tenant, record, filters=[("status", "unmatched"), ("ledger._row__gte", "1")]
    )
    assert len(found) == len(unmatched) == 1


def test_a_run_that_changes_nothing_keeps_the_data_version(
    runtime: Runtime, tenant: Tenant
) -> None:
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    first = output_resource(runtime, record).data_version
    again = run_now(runtime, record)
    assert output_resource(runtime, record).data_version == first
    assert again.last_run is not None
    assert again.state == "idle"
    append(
        runtime, record_left(record), "reference,amount,txn_date,memo\nREF-9,1.00,2024-01-09,x\n"
    )
    changed = run_now(runtime, record)
    assert output_resource(runtime, record).data_version == first + 1
    assert changed.last_run is not None
    assert changed.last_run["counts"]["unmatched_right"] == 0


def test_a_whole_run_that_finds_the_published_rows_keeps_the_data_version(
    runtime: Runtime, tenant: Tenant
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    keyless = {"name": "amount and date", "type": "one_to_one", "keys": []}
    record = make_reconciliation(
        runtime.engine, tenant, definition_json(left, right, passes=[keyless])
    )
    run_now(runtime, record)
    first = output_resource(runtime, record)
    again = run_now(runtime, record)  # a pass without keys: every run is whole
    assert again.last_run is not None
    assert again.last_run["mode"] == "full"
    assert again.last_run["counts"]["unmatched_right"] == 3  # the split's two parts, REF-9
    assert output_resource(runtime, record).data_version == first.data_version
    assert output_rows(runtime, tenant, record) == output_rows(runtime, tenant, again)
    append(runtime, left, "reference,amount,txn_date,memo\nREF-8,1.00,2024-01-09,x\n")
    changed = run_now(runtime, record)
    assert output_resource(runtime, record).data_version == first.data_version + 1
    assert changed.last_run is not None
    assert changed.last_run["counts"]["unmatched_right"] == 2  # 4.00 and 6.00; 1.00 found one


def test_an_output_written_in_many_batches_is_the_one_written_in_one(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    whole = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    run_now(runtime, whole)
    monkeypatch.setattr(derived_outputs, "BATCH_ROWS", 2)  # plan and fill: 3 batches each
    batched = make_reconciliation(
        runtime.engine, tenant, definition_json(left, right, name="In batches")
    )
    run_now(runtime, batched)
    assert output_resource(runtime, batched).row_count == 6
    assert output_rows(runtime, tenant, batched) == output_rows(runtime, tenant, whole)


def test_an_output_filled_in_several_sessions_is_the_one_filled_in_one(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL fills a large output in sessions at once (derived_plans.FILL_SESSIONS);
    here every output is large enough, and six rows are filled in three sessions."""
    left, right = bank_and_ledger(runtime, tenant)
    whole = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    run_now(runtime, whole)
    monkeypatch.setattr(derived_plans, "FILL_SESSIONS_FROM", 0)
    monkeypatch.setattr(derived_plans, "FILL_SESSIONS", 4)  # ranges of ceil(6 / 4) = 2 rows
    split = make_reconciliation(
        runtime.engine, tenant, definition_json(left, right, name="In sessions")
    )
    run_now(runtime, split)
    assert output_resource(runtime, split).row_count == 6
    assert output_rows(runtime, tenant, split) == output_rows(runtime, tenant, whole)


def record_left(record: DerivedRecord) -> int:
    return int(record.definition["left"]["resource_id"])


def test_files_in_either_order_or_in_one_give_the_same_rows(
    runtime: Runtime, tenant: Tenant
) -> None:
    header, *lines = LEDGER_CSV.splitlines()
    first, second = "\n".join([header, *lines[:2]]) + "\n", "\n".join([header, *lines[2:]]) + "\n"
    outputs = []
    for n, parts in enumerate(([first, second], [second, first], [LEDGER_CSV])):
        bank = make_source_named(runtime, tenant, BANK_CSV)
        ledger = make_source_named(runtime, tenant, parts[0])
        for part in parts[1:]:
            append(runtime, ledger, part)
        definition = definition_json(bank, ledger, name=f"order {n}")
        record = make_reconciliation(runtime.engine, tenant, definition)
        run_now(runtime, record)
        outputs.append(Counter(_without_positions(r) for r in output_rows(runtime, tenant, record)))
    assert outputs[0] == outputs[1] == outputs[2]


def make_source_named(runtime: Runtime, tenant: Tenant, content: str) -> int:
    return make_source(runtime.engine, tenant, content).id


def _without_positions(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        (k, str(v)) for k, v in row.items() if k not in ("match_id", "bank._row", "ledger._row")
    )


def test_manual_work_survives_runs(runtime: Runtime, tenant: Tenant) -> None:
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    service = ReconciliationService(runtime.engine)
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": record.id}
    assert service.match(**ids, left_rows=[4], right_rows=[5], note="by hand") == 4
    assert service.undo(**ids, match_id=1) == "rejected"  # bank 1 with ledger 2
    for n in range(2):
        run_now(runtime, record)
        rows = output_rows(runtime, tenant, record)
        by_left = {r["bank._row"]: r for r in rows if r["bank._row"] is not None}
        assert (by_left[4]["status"], by_left[4]["ledger._row"]) == ("manual", 5)
        assert by_left[4]["pass"] == "manual"
        assert by_left[1]["status"] == "unmatched"  # never paired with ledger row 2 again
        append(
            runtime,
            record_left(record),
            f"reference,amount,txn_date,memo\nREF-{n},7.00,2024-02-01,x\n",
        )


def test_manual_work_clears_the_text_an_older_output_kept(runtime: Runtime, tenant: Tenant) -> None:
    """An output published before outputs stopped keeping row text still has it: the rows
    a match by hand changes lose theirs, so pages show the match, not the stale text."""
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    output = output_resource(runtime, record)
    assert store_row_json(runtime.engine, output.table_name, output.columns) == output.row_count
    service = ReconciliationService(runtime.engine)
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": record.id}
    assert service.match(**ids, left_rows=[4], right_rows=[5], note="by hand") == 4
    rows = output_rows(runtime, tenant, record)
    by_left = {r["bank._row"]: r for r in rows if r["bank._row"] is not None}
    by_right = {r["ledger._row"]: r for r in rows if r["ledger._row"] is not None}
    assert by_left[4]["status"] == by_right[5]["status"] == "manual"  # until the next run
    kept = read_body(runtime, tenant, output.id)
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {output.table_name} SET _json = NULL")
    assert read_body(runtime, tenant, output.id) == kept  # no row's text was stale


# --- the queue, the lease, the attempts ----------------------------------------------------


def test_a_failing_run_ends_failed_after_bounded_attempts(runtime: Runtime, tenant: Tenant) -> None:
    record = reconciled(runtime, tenant)
    definition = {**record.definition, "left": {**record.definition["left"], "amount": "gone"}}
    with runtime.engine.begin() as conn:  # a definition this version cannot run
        conn.execute(
            sa.update(derived_resources_table)
            .where(derived_resources_table.c.id == record.id)
            .values(definition=definition)
        )
    runs = 0
    deadline = utc_now() + dt.timedelta(seconds=30)
    while derived(runtime, record.id).state != "failed" and utc_now() < deadline:
        runs += runtime.derived.run_one(worker="test")
    failed = derived(runtime, record.id)
    assert (failed.state, runs, failed.run_due_at) == ("failed", 2, None)
    assert failed.error is not None
    assert "'gone'" in failed.error
    assert not runtime.derived.run_one(worker="test")  # no loop
    with pytest.raises(RunFailedError, match="'gone'"):
        run_now(runtime, record)  # a new wish: a new series of attempts, failing alike


def test_two_workers_never_hold_the_same_run(runtime: Runtime, tenant: Tenant) -> None:
    """Nor does the phase a dead worker's run was in outlive it: shown `stalled` once its
    lease has expired, and the run taken up again starts over."""
    record = reconciled(runtime, tenant)
    now = utc_now()
    with write_connection(runtime.engine) as conn, conn.begin():
        first = derived_records.claim_due(
            conn, worker="a", now=now, lease_seconds=3, phase=STARTING
        )
    with write_connection(runtime.engine) as conn, conn.begin():
        second = derived_records.claim_due(
            conn, worker="b", now=now, lease_seconds=3, phase=STARTING
        )
        assert not derived_records.extend_lease(conn, record.id, "b", now, 3)
    assert first is not None
    assert first.id == record.id
    assert (first.run_phase, first.run_phase_since, first.run_started_at) == (STARTING, now, now)
    assert second is None
    matching = now + dt.timedelta(seconds=1)
    with write_connection(runtime.engine) as conn, conn.begin():
        assert derived_records.record_phase(conn, record.id, "a", phase="matching", now=matching)
        assert not derived_records.record_phase(conn, record.id, "b", phase="writing", now=now)
    dying = derived(runtime, record.id)
    assert RunUnderWay.of(dying, matching) == RunUnderWay("matching", matching, now)
    later = now + dt.timedelta(seconds=4)  # a's lease expired: its worker died
    assert RunUnderWay.of(dying, later) == RunUnderWay(STALLED, now + dt.timedelta(seconds=3), now)
    with write_connection(runtime.engine) as conn, conn.begin():
        taken = derived_records.claim_due(
            conn, worker="b", now=later, lease_seconds=3, phase=STARTING
        )
        assert taken is not None
        assert taken.attempts == 2
        assert not derived_records.extend_lease(conn, record.id, "a", later, 3)
        assert not derived_records.record_phase(conn, record.id, "a", phase="writing", now=later)
    assert RunUnderWay.of(derived(runtime, record.id), later) == RunUnderWay(STARTING, later, later)


def test_a_worker_whose_lease_passed_on_writes_nothing(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    version = output_resource(runtime, record).data_version
    append(
        runtime, record_left(record), "reference,amount,txn_date,memo\nREF-8,8.00,2024-02-01,x\n"
    )
    with write_connection(runtime.engine) as conn, conn.begin():
        derived_records.request_run(conn, record.id, utc_now())
    claim_due = derived_records.claim_due

    def claimed_then_taken_over(conn: sa.Connection, **how: Any) -> DerivedRecord | None:
        claimed = claim_due(conn, **how)
        conn.exec_driver_sql(  # another worker took it over meanwhile
            f"UPDATE derived_resources SET lease_owner = 'other' WHERE id = {record.id}"
        )
        return claimed

    monkeypatch.setattr(derived_records, "claim_due", claimed_then_taken_over)
    assert runtime.derived.run_one(worker="gone")  # claimed, and run with a lost lease
    assert output_resource(runtime, record).data_version == version
    with runtime.engine.connect() as conn:
        owner = conn.exec_driver_sql(
            f"SELECT lease_owner FROM derived_resources WHERE id = {record.id}"
        ).scalar_one()
    assert owner == "other"


def test_rows_reaching_an_input_rerun_it_once_per_burst_in_a_worker(
    runtime: Runtime, tenant: Tenant, worker: Worker
) -> None:
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    version = output_resource(runtime, record).data_version
    for n in range(3):  # a burst: three files before any worker looks
        append(
            runtime,
            record_left(record),
            f"reference,amount,txn_date,memo\nNEW-{n},1.00,2024-03-01,x\n",
        )
    worker.start()

    def rerun() -> DerivedRecord | None:
        current = derived(runtime, record.id)
        done = current.last_run and current.last_run["counts"]["unmatched_left"] == 4
        return current if done and current.state == "idle" else None

    eventually(rerun, timeout=60, what="the reconciliation to re-run by itself")
    assert output_resource(runtime, record).data_version == version + 1  # once
    append(
        runtime,
        int(record.definition["right"]["resource_id"]),
        "reference,amount,txn_date,account\nNEW-0,1.00,2024-03-01,1\n",
    )
    eventually(
        lambda: derived(runtime, record.id).last_run["counts"]["unmatched_left"] == 3,  # type: ignore[index]
        timeout=60,
        what="a delivery to the right side to re-run it",
    )
    assert output_resource(runtime, record).data_version == version + 2


def test_an_idle_worker_is_told_when_a_queued_run_falls_due(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The worker sleeps until the burst ends, not a whole poll later (worker/runner.py)."""
    derived_runs = runtime.derived
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    assert derived_runs.seconds_until_due() is None
    append(
        runtime, record_left(record), "reference,amount,txn_date,memo\nNEW-0,1.00,2024-03-01,x\n"
    )
    [changed_at] = pending_change_times(runtime)
    assert derived_runs.queue_changed_inputs()
    burst = dt.timedelta(seconds=derived_runs.policy.burst_seconds)
    assert derived(runtime, record.id).run_due_at == changed_at + burst  # not due before
    left = derived_runs.seconds_until_due()
    assert left is not None
    assert left <= burst.total_seconds() + 0.01  # the burst at most, never a poll
    if left > 0:  # (a loaded machine may get here past the burst: 0.0 was said already)
        eventually(lambda: derived_runs.seconds_until_due() == 0.0, timeout=10, what="due")
    assert derived_runs.run_one(worker="w")  # due: the claim takes it
    assert derived_runs.seconds_until_due() is None


def test_a_run_falls_due_a_burst_after_the_change_not_after_it_was_noticed(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The burst counts from the change (its outbox event, written with the rows), so a
    worker that gets to the event late does not add another burst."""
    derived_runs = runtime.derived
    record = reconciled(runtime, tenant)
    run_now(runtime, record)
    append(
        runtime, record_left(record), "reference,amount,txn_date,memo\nNEW-0,1.00,2024-03-01,x\n"
    )
    an_hour_ago = utc_now() - dt.timedelta(hours=1)  # the change, noticed only now
    with write_connection(runtime.engine) as conn, conn.begin():
        pending = outbox_events.c.processed_at.is_(None)
        conn.execute(sa.update(outbox_events).where(pending).values(created_at=an_hour_ago))
    assert derived_runs.queue_changed_inputs()
    assert derived_runs.seconds_until_due() == 0.0
    assert derived_runs.run_one(worker="w")  # due at once


def test_run_now_waits_for_the_run_another_worker_holds(runtime: Runtime, tenant: Tenant) -> None:
    record = reconciled(runtime, tenant)
    with write_connection(runtime.engine) as conn, conn.begin():
        held = derived_records.claim_due(
            conn, worker="other", now=utc_now(), lease_seconds=30, phase=STARTING
        )
    assert held is not None
    waiting = ThreadPoolExecutor(1).submit(run_now, runtime, record)
    eventually(
        lambda: derived(runtime, record.id).run_due_at is not None,
        timeout=30,
        what="run_now's wish",
    )
    assert not waiting.done()  # the other worker still holds it
    with write_connection(runtime.engine) as conn, conn.begin():  # it finishes, unpublished
        derived_records.record_success(
            conn, record.id, now=utc_now(), last_run={}, output_digest="other", run_basis=None
        )
    done = waiting.result(timeout=60)  # then the wish is run here

    assert done.last_run is not None
    assert done.last_run["counts"]["unmatched_left"] == 1
    assert output_resource(runtime, record).row_count == 6


def test_run_now_takes_a_run_claimed_after_its_wish_whatever_its_clock_said(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker reads its clock, then claims: its claim can land after run_now's wish
    was written, on an earlier wish the new one joined, with a start time before the
    wish's. That run read everything the wish was for: run_now returns it, not
    "the run did not finish" (seen in CI, a console test's `tally serve` beside it)."""
    record = reconciled(runtime, tenant)
    with write_connection(runtime.engine) as conn, conn.begin():
        derived_records.request_run(conn, record.id, utc_now())  # an earlier wish
    clock_read = utc_now()  # the other worker's, before run_now's wish
    claim = runtime.derived._claim

    def other_worker_first(worker: str, only: int | None) -> DerivedRecord | None:
        monkeypatch.setattr(runtime.derived, "_claim", claim)
        with write_connection(runtime.engine) as conn, conn.begin():
            held = derived_records.claim_due(
                conn, worker="other", now=clock_read, lease_seconds=30, phase=STARTING
            )
            assert held is not None
            derived_records.record_success(
                conn,
                record.id,
                now=utc_now(),
                last_run={"started_at": clock_read.isoformat()},
                output_digest="other",
                run_basis=None,
            )
        return None

    monkeypatch.setattr(runtime.derived, "_claim", other_worker_first)
    done = run_now(runtime, record)

    assert done.last_run == {"started_at": clock_read.isoformat()}
    assert done.state == "idle"


@pytest.mark.parametrize("long_name", [False, True])
def test_pages_of_awkward_rows_read_as_stored_text_would(
    runtime: Runtime, tenant: Tenant, long_name: bool
) -> None:
    """Every type and awkward value, a name longer than a PostgreSQL identifier or not:
    the output's pages, rendered, are byte for byte what its rows' stored text reads."""
    rows = list(csv.reader(io.StringIO(AWKWARD, newline="")))
    rows = [row if long_name else row[:-1] for row in rows]
    bank = make_source(runtime.engine, tenant, _csv(rows), name="awkward bank")
    ledger = make_source(runtime.engine, tenant, _csv(rows[:3]), name="awkward ledger")
    definition = definition_json(
        bank.id,
        ledger.id,
        passes=[{"name": "same id", "type": "one_to_one", "keys": [{"left": "id", "right": "id"}]}],
    )
    definition["left"].update(amount="amount", date="on_day")
    definition["right"].update(amount="amount", date="on_day")
    record = make_reconciliation(runtime.engine, tenant, definition)
    run_now(runtime, record)
    output = output_resource(runtime, record)
    renders_as_stored_text(
        runtime,
        output,
        lambda: [read_body(runtime, tenant, output.id, **q) for q in OUTPUT_QUERIES],
    )


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def test_a_match_of_several_left_rows_gives_a_row_at_each_of_their_positions(
    runtime: Runtime, tenant: Tenant
) -> None:
    bank = (
        "reference,amount,txn_date,memo\n"
        "REF-A,4.00,2024-01-05,part\nREF-B,5.00,2024-01-05,whole\nREF-A,6.00,2024-01-05,part\n"
    )
    ledger = (
        "reference,amount,txn_date,account\nREF-B,5.00,2024-01-05,1\nREF-A,10.00,2024-01-05,2\n"
    )
    left, right = bank_and_ledger(runtime, tenant, bank, ledger)
    passes = [
        {
            "name": "sums",
            "type": "many_to_one",
            "keys": [{"left": "reference", "right": "reference"}],
        }
    ]
    record = make_reconciliation(
        runtime.engine, tenant, definition_json(left, right, passes=passes)
    )
    last_run = run_now(runtime, record).last_run

    rows = output_rows(runtime, tenant, record)
    assert [(r["match_id"], r["bank._row"], r["ledger._row"]) for r in rows] == [
        (1, 1, 2),
        (2, 2, 1),
        (1, 3, 2),  # the match's second left row, at its own position
    ]
    assert last_run is not None
    assert last_run["counts"]["matched"] == 2
    assert last_run["amounts"]["left"] == {
        "matched": "15.00",
        "unmatched": "0.00",
        "resolved": "0.00",
        "matched_by_status": split(matched="15.00"),
    }
