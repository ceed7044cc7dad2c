"""Snapshot sources and files taken back (issue #32 points 5 and 7), on both backends:
a snapshot replaces every row in the file's transaction, a file taken back removes only
its rows; row ids are never given twice; manual reconciliation work on rows that come
back is carried to their new positions and the rest retired with its reason, counted in
the next run; derived resources run again and give what a full run gives."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from support.factories import Tenant, make_tenant, read_data, run_pipeline
from support.reconciliation_runs import (
    assert_same_as_full,
    definition_json,
    derived,
    make_reconciliation,
    output_rows,
    run,
)
from support.transformations import output
from support.transformations import run as run_transformation
from tally.core.errors import ConflictError, FileNotFoundInSourceError, ResourceNotFoundError
from tally.core.files import FileStatus
from tally.core.reconciliation import SideName
from tally.runtime import Runtime
from tally.services.sources import SourceDefinition
from tally.storage import outbox
from tally.storage.resources import REPLACE, Resource, find_resource

HEADER = "reference,amount,txn_date\n"
BANK = HEADER + "A,10.00,2026-10-01\nB,20.00,2026-10-02\nC,30.00,2026-10-03\nD,40.00,2026-10-04\n"
# The ERP's ledger, exported whole each day.
DAY_1 = HEADER + "A,10.00,2026-10-01\nX,99.00,2026-10-02\nC,30.00,2026-10-03\n"
DAY_2 = HEADER + "B,20.00,2026-10-02\nC,30.00,2026-10-03\nD,40.00,2026-10-04\n"


@pytest.fixture
def tenant(runtime: Runtime) -> Tenant:
    return make_tenant(runtime.engine, ingestion=True)


def new_source(runtime: Runtime, tenant: Tenant, name: str, mode: str = "append") -> Resource:
    return runtime.sources.create_source(
        workspace_id=tenant.workspace_id, definition=SourceDefinition(name, mode=mode)
    )


def deliver(runtime: Runtime, tenant: Tenant, source: Resource, csv: str) -> int:
    """An upload of `csv`, loaded as a worker loads it; the file's id."""
    file_id = runtime.uploads.queue_upload(
        workspace_id=tenant.workspace_id,
        source_id=source.id,
        staged=runtime.uploads.stage_csv([csv.encode()]),
        filename=None,
        idempotency_key=None,
    ).file_id
    run_pipeline(runtime)
    runtime.catalogue.finish_one_unfinished()
    return file_id


def status(runtime: Runtime, tenant: Tenant, source: Resource, file_id: int) -> FileStatus:
    return runtime.files.get_source_file(
        workspace_id=tenant.workspace_id, source_id=source.id, file_id=file_id
    ).status


def rows(runtime: Runtime, tenant: Tenant, source: Resource) -> list[dict[str, Any]]:
    return read_data(
        runtime, tenant, source.id, fields="reference,amount,_row,_file_id", ordering="_row"
    )


def current(runtime: Runtime, source: Resource) -> Resource:
    with runtime.engine.connect() as conn:
        found = find_resource(conn, source.id)
    assert found is not None
    return found


def retract(runtime: Runtime, tenant: Tenant, source: Resource, file_id: int) -> Any:
    return runtime.files.retract(
        workspace_id=tenant.workspace_id, source_id=source.id, file_id=file_id, by="tester"
    )


def test_a_snapshot_replaces_every_row_and_only_the_held_snapshot_is_a_duplicate(
    runtime: Runtime, tenant: Tenant
) -> None:
    ledger = new_source(runtime, tenant, "ledger", mode=REPLACE)
    first = deliver(runtime, tenant, ledger, DAY_1)
    before = rows(runtime, tenant, ledger)
    assert [r["reference"] for r in before] == ["A", "X", "C"]
    second = deliver(runtime, tenant, ledger, DAY_2)
    after = rows(runtime, tenant, ledger)
    assert [r["reference"] for r in after] == ["B", "C", "D"]
    assert {r["_file_id"] for r in after} == {second}
    # A row id is never given twice, whatever was removed.
    assert min(r["_row"] for r in after) > max(r["_row"] for r in before)
    state = current(runtime, ledger)
    assert state.row_count == 3
    assert state.removed_version == state.data_version - 1  # removed, then loaded
    # The table it replaced is gone, and the new one has its indexes, under their names.
    assert state.indexed_version == state.data_version
    with runtime.engine.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes(ledger.table_name)}
    assert f"{ledger.table_name}_replaced" not in tables
    assert f"{ledger.table_name}_snapshot" not in tables
    assert {f"ix_{ledger.table_name}_c0", f"ix_{ledger.table_name}__file_id"} <= indexes
    again = deliver(runtime, tenant, ledger, DAY_2)
    assert status(runtime, tenant, ledger, again) is FileStatus.DUPLICATE
    assert current(runtime, ledger).data_version == state.data_version
    # The first day's bytes again: not the snapshot held, so they replace it.
    back = deliver(runtime, tenant, ledger, DAY_1)
    assert status(runtime, tenant, ledger, back) is FileStatus.DELIVERED
    assert [r["reference"] for r in rows(runtime, tenant, ledger)] == ["A", "X", "C"]
    assert status(runtime, tenant, ledger, first) is FileStatus.DELIVERED


def test_a_snapshot_that_fails_leaves_the_rows_it_would_have_replaced(
    runtime: Runtime, tenant: Tenant
) -> None:
    ledger = new_source(runtime, tenant, "ledger", mode=REPLACE)
    deliver(runtime, tenant, ledger, DAY_1)
    version = current(runtime, ledger).data_version
    bad = deliver(runtime, tenant, ledger, HEADER + "B,twenty,2026-10-02\n")
    assert status(runtime, tenant, ledger, bad) is FileStatus.FAILED
    assert [r["reference"] for r in rows(runtime, tenant, ledger)] == ["A", "X", "C"]
    assert current(runtime, ledger).data_version == version


def test_manual_work_on_rows_a_snapshot_brings_back_is_carried_and_the_rest_retired(
    runtime: Runtime, tenant: Tenant
) -> None:
    bank = new_source(runtime, tenant, "bank")
    deliver(runtime, tenant, bank, BANK)
    ledger = new_source(runtime, tenant, "ledger", mode=REPLACE)
    deliver(runtime, tenant, ledger, DAY_1)
    passes = [{"name": "amount", "type": "one_to_one", "keys": [], "amount_tolerance": "0"}]
    record = make_reconciliation(
        runtime.engine, tenant, definition_json(bank.id, ledger.id, passes=passes)
    )
    run(runtime, record)
    service, ws = runtime.reconciliations, tenant.workspace_id
    # bank A with ledger A (ledger row 1), bank C with ledger C (ledger row 3).
    service.match(
        workspace_id=ws, reconciliation_id=record.id, left_rows=[1], right_rows=[1], note=None
    )
    service.match(
        workspace_id=ws, reconciliation_id=record.id, left_rows=[3], right_rows=[3], note="ok"
    )
    run(runtime, record)

    snapshot = deliver(runtime, tenant, ledger, DAY_2)  # A is gone; C is now row 2

    history = service.actions(workspace_id=ws, reconciliation_id=record.id)
    first, second, carried = history
    assert first.undone_at is not None
    assert first.retired_reason == (
        f"ledger row 1 no longer in ledger: file {snapshot} replaced its rows"
    )
    assert second.undone_at is not None
    assert second.retired_reason == (
        f"carried to action {carried.id}: file {snapshot} replaced its rows; now ledger rows 2"
    )
    assert (carried.carried_from, carried.left_rows, carried.right_rows) == (second.id, (3,), (2,))
    assert (carried.undone_at, carried.note, carried.match_id) == (None, "ok", 3)

    last = run(runtime, record)
    assert last["mode"] == "full"
    assert last["manual_work"]["carried"] == 1
    assert last["manual_work"]["retired"] == 1
    assert last["manual_work"]["matches"] == 1
    manual = [r for r in output_rows(runtime, tenant, record) if r["status"] == "manual"]
    assert [(r["bank.reference"], r["ledger.reference"]) for r in manual] == [("C", "C")]
    # Counted once: the next run has nothing new to report.
    again = run(runtime, record)
    assert (again["manual_work"]["carried"], again["manual_work"]["retired"]) == (0, 0)


def test_taking_a_file_back_removes_its_rows_only_and_moves_the_work_on_the_others(
    runtime: Runtime, tenant: Tenant
) -> None:
    bank = new_source(runtime, tenant, "bank")
    deliver(runtime, tenant, bank, BANK)
    ledger = new_source(runtime, tenant, "ledger")
    early = deliver(runtime, tenant, ledger, HEADER + "A,10.00,2026-10-01\nB,20.00,2026-10-02\n")
    late = deliver(runtime, tenant, ledger, HEADER + "C,30.00,2026-10-03\nD,40.00,2026-10-04\n")
    record = make_reconciliation(runtime.engine, tenant, definition_json(bank.id, ledger.id))
    run(runtime, record)
    service, ws = runtime.reconciliations, tenant.workspace_id
    service.match(
        workspace_id=ws, reconciliation_id=record.id, left_rows=[1], right_rows=[1], note=None
    )
    service.match(
        workspace_id=ws, reconciliation_id=record.id, left_rows=[4], right_rows=[4], note=None
    )
    run(runtime, record)
    version = current(runtime, ledger).data_version

    taken = retract(runtime, tenant, ledger, early)

    assert (taken.status, taken.retracted_by) == (FileStatus.RETRACTED, "tester")
    assert taken.retracted_at is not None
    assert [r["reference"] for r in rows(runtime, tenant, ledger)] == ["C", "D"]
    assert current(runtime, ledger).data_version == version + 1
    history = service.actions(workspace_id=ws, reconciliation_id=record.id)
    assert history[0].retired_reason == (
        f"ledger row 1 no longer in ledger: file {early} was taken back by tester"
    )
    assert history[2].carried_from == history[1].id
    assert (history[2].left_rows, history[2].right_rows) == ((4,), (2,))
    with runtime.engine.connect() as conn:
        events = conn.execute(
            sa.text("SELECT topic, type FROM outbox_events WHERE file_id = :f ORDER BY id"),
            {"f": early},
        ).all()
    assert (outbox.STATUS_CALLBACK, "file.retracted") in events
    assert (outbox.INPUT_CHANGED, "file.retracted") in events

    # Taken back again: answered as it is, nothing more happens.
    assert retract(runtime, tenant, ledger, early).retracted_at == taken.retracted_at
    assert current(runtime, ledger).data_version == version + 1
    last = run(runtime, record)
    assert (last["manual_work"]["retired"], last["manual_work"]["carried"]) == (1, 1)
    assert_same_as_full(
        runtime,
        tenant,
        derived(runtime, record.id),
        manual=lambda other: service.match(
            workspace_id=ws, reconciliation_id=other.id, left_rows=[4], right_rows=[2], note=None
        ),
    )
    assert late  # its rows stay


def test_a_row_id_of_a_file_taken_back_is_never_given_again(
    runtime: Runtime, tenant: Tenant
) -> None:
    ledger = new_source(runtime, tenant, "ledger")
    deliver(runtime, tenant, ledger, DAY_1)
    last = deliver(runtime, tenant, ledger, DAY_2)
    gone = max(r["_row"] for r in rows(runtime, tenant, ledger))
    retract(runtime, tenant, ledger, last)  # the rows with the highest ids
    deliver(runtime, tenant, ledger, HEADER + "E,50.00,2026-10-05\n")
    newest = rows(runtime, tenant, ledger)[-1]
    assert newest["reference"] == "E"
    assert newest["_row"] > gone


def test_only_a_delivered_file_of_the_workspace_can_be_taken_back(
    runtime: Runtime, tenant: Tenant
) -> None:
    ledger = new_source(runtime, tenant, "ledger")
    delivered = deliver(runtime, tenant, ledger, DAY_1)
    failed = deliver(runtime, tenant, ledger, HEADER + "A,ten,2026-10-01\n")
    with pytest.raises(ConflictError, match=f"file {failed} is failed: only a delivered file"):
        retract(runtime, tenant, ledger, failed)
    with pytest.raises(FileNotFoundInSourceError):
        retract(runtime, tenant, ledger, delivered + 1000)
    other = make_tenant(runtime.engine, ingestion=True)
    with pytest.raises(ResourceNotFoundError):
        retract(runtime, other, ledger, delivered)
    assert status(runtime, tenant, ledger, delivered) is FileStatus.DELIVERED


def test_transformations_reading_a_source_run_again_on_what_is_left(
    runtime: Runtime, tenant: Tenant
) -> None:
    ledger = new_source(runtime, tenant, "ledger")
    early = deliver(runtime, tenant, ledger, DAY_1)
    created = runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={
            "name": "big",
            "inputs": {"ledger": ledger.id},
            "sql": "SELECT reference, amount FROM ledger WHERE amount > 15",
        },
    )
    assert run_transformation(runtime, created.id)["rows"] == 2
    deliver(runtime, tenant, ledger, DAY_2)
    assert run_transformation(runtime, created.id)["incremental"] is True
    retract(runtime, tenant, ledger, early)
    done = run_transformation(runtime, created.id)
    assert (done["rows"], done["incremental"]) == (3, False)
    shown = read_data(runtime, tenant, output(runtime, created.id).id, ordering="reference")
    assert [r["reference"] for r in shown] == ["B", "C", "D"]


def test_both_sides_reading_one_source_are_found_again(runtime: Runtime, tenant: Tenant) -> None:
    """Both sides reading one source: each side's rows are found again."""
    ledger = new_source(runtime, tenant, "ledger")
    early = deliver(runtime, tenant, ledger, HEADER + "Z,1.00,2026-10-01\n")
    deliver(runtime, tenant, ledger, DAY_2)
    record = make_reconciliation(runtime.engine, tenant, definition_json(ledger.id, ledger.id))
    run(runtime, record)
    runtime.reconciliations.match(
        workspace_id=tenant.workspace_id,
        reconciliation_id=record.id,
        left_rows=[2],
        right_rows=[3],
        note="two rows of one ledger",
    )
    retract(runtime, tenant, ledger, early)
    *_, carried = runtime.reconciliations.actions(
        workspace_id=tenant.workspace_id, reconciliation_id=record.id
    )
    assert (carried.left_rows, carried.right_rows) == ((1,), (2,))
    assert carried.undone_at is None


def test_a_snapshot_with_more_digits_widens_the_column_and_keeps_every_value(
    runtime: Runtime, tenant: Tenant
) -> None:
    ledger = new_source(runtime, tenant, "ledger", mode=REPLACE)
    deliver(runtime, tenant, ledger, DAY_1)
    deliver(runtime, tenant, ledger, HEADER + "A,10.125,2026-10-01\nB,-0.001,2026-10-02\n")
    shown = read_data(runtime, tenant, ledger.id, fields="reference,amount")
    assert [(r["reference"], str(r["amount"])) for r in shown] == [
        ("A", "10.125"),
        ("B", "-0.001"),
    ]
    assert next(c for c in current(runtime, ledger).columns if c.name == "amount").scale == 3


def test_a_resolution_is_carried_when_its_rows_move_and_retired_when_they_go(
    runtime: Runtime, tenant: Tenant
) -> None:
    """A resolution is manual work like a match: a file taken back moves it to its row's
    new position (carried), and retires it when its row went with the file."""
    bank = new_source(runtime, tenant, "bank")
    deliver(runtime, tenant, bank, BANK)
    ledger = new_source(runtime, tenant, "ledger")
    early = deliver(runtime, tenant, ledger, HEADER + "A,10.00,2026-10-01\nY,55.00,2026-10-02\n")
    deliver(runtime, tenant, ledger, HEADER + "E,77.00,2026-10-03\nD,40.00,2026-10-04\n")
    passes = [{"name": "amount", "type": "one_to_one", "keys": [], "amount_tolerance": "0"}]
    record = make_reconciliation(
        runtime.engine, tenant, definition_json(bank.id, ledger.id, passes=passes)
    )
    run(runtime, record)
    service, ws = runtime.reconciliations, tenant.workspace_id
    ids = {"workspace_id": ws, "reconciliation_id": record.id}
    gone = service.resolve(**ids, side=SideName.RIGHT, rows=[2], reason="duplicate", note=None)
    kept = service.resolve(**ids, side=SideName.RIGHT, rows=[3], reason="timing", note="March")

    retract(runtime, tenant, ledger, early)  # ledger rows now E (1), D (2)

    history = {a.id: a for a in service.actions(**ids)}
    assert history[gone.id].retired_reason == (
        f"ledger row 2 no longer in ledger: file {early} was taken back by tester"
    )
    [carried] = [a for a in history.values() if a.carried_from == kept.id]
    assert (carried.side, carried.rows, carried.reason, carried.note) == (
        SideName.RIGHT,
        (1,),
        "timing",
        "March",
    )
    assert (carried.match_id, carried.actor) == (None, kept.actor)
    last = run(runtime, record)
    assert last["counts"]["resolved_right"] == 1
    resolved = [r for r in output_rows(runtime, tenant, record) if r["status"] == "resolved"]
    assert [(r["ledger._row"], r["ledger.reference"], r["reason"]) for r in resolved] == [
        (1, "E", "resolved: timing, by an analyst (March)")
    ]
