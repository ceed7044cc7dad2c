"""The history of derived runs (both backends): each finished run of a transformation or
a reconciliation is kept, succeeded with its rows or failed with its error in full,
newest first; only the last RUNS_KEPT of each; gone with its derived resource."""

from __future__ import annotations

import datetime as dt

import pytest

from support.factories import Tenant, make_tenant
from support.reconciliation_runs import output_resource
from support.reconciliations import definition, make_pair
from support.transformations import FILTER_SQL, make_inputs, run, transformation
from tally.core.derived_runs import FAILED, SUCCEEDED
from tally.core.errors import RunFailedError, TransformationNotFoundError
from tally.runtime import Runtime
from tally.storage.derived import runs as run_history
from tally.storage.engine import write_connection

FAILING_SQL = "SELECT CAST(s.currency AS INTEGER) AS n FROM s"


def test_each_run_is_kept_newest_first_with_its_rows_or_its_error(
    runtime: Runtime, tenant: Tenant
) -> None:
    inputs = make_inputs(runtime.engine, tenant)
    service, workspace_id = runtime.transformations, tenant.workspace_id
    made = service.create(workspace_id=workspace_id, body=transformation(inputs, sql=FILTER_SQL))
    assert service.list_runs(workspace_id=workspace_id, derived_id=made.id) == []
    run(runtime, made.id)
    service.replace(
        workspace_id=workspace_id, derived_id=made.id, body=transformation(inputs, sql=FAILING_SQL)
    )
    with pytest.raises(RunFailedError) as failure:
        runtime.derived.run_now(made.id, kind="transformation", worker="test")
    runs = service.list_runs(workspace_id=workspace_id, derived_id=made.id)
    assert [(r.outcome, r.rows, r.error) for r in runs] == [
        (FAILED, None, failure.value.message),
        (SUCCEEDED, 4, None),
    ]
    assert "the query failed" in (runs[0].error or "")
    assert runs[0].started_at >= runs[1].finished_at
    assert all(r.finished_at >= r.started_at for r in runs)
    assert runs[0].to_json()["outcome"] == "failed"


def test_a_reconciliations_runs_are_kept_the_same_way(runtime: Runtime, tenant: Tenant) -> None:
    made = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(make_pair(runtime.engine, tenant))
    )
    record = runtime.derived.run_now(made.id, kind="reconciliation", worker="test")
    runs = runtime.reconciliations.list_runs(workspace_id=tenant.workspace_id, derived_id=made.id)
    assert [(r.outcome, r.error) for r in runs] == [(SUCCEEDED, None)]
    assert runs[0].rows == output_resource(runtime, record).row_count
    assert runs[0].started_at.isoformat() == (record.last_run or {})["started_at"]


def test_only_the_last_runs_are_kept_and_they_go_with_their_resource(
    runtime: Runtime, tenant: Tenant
) -> None:
    inputs = make_inputs(runtime.engine, tenant)
    made = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(inputs, sql=FILTER_SQL)
    )
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    with write_connection(runtime.engine) as conn, conn.begin():
        for n in range(5):
            at = start + dt.timedelta(minutes=n)
            run_history.insert_run(
                conn, made.id, started_at=at, finished_at=at, outcome=SUCCEEDED, rows=n, keep=3
            )
    kept = runtime.transformations.list_runs(workspace_id=tenant.workspace_id, derived_id=made.id)
    assert [r.rows for r in kept] == [4, 3, 2]
    theirs = make_tenant(runtime.engine)
    with pytest.raises(TransformationNotFoundError):
        runtime.transformations.list_runs(workspace_id=theirs.workspace_id, derived_id=made.id)
    runtime.transformations.delete(workspace_id=tenant.workspace_id, derived_id=made.id)
    with runtime.engine.connect() as conn:
        assert run_history.list_runs(conn, made.id) == []
