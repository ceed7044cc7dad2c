"""An analyst's action taken while a run is between reading the manual work and
publishing (both backends): the run publishes the output it built, the action is kept,
and the run the action queued shows it. The output may show the rows as the running run
left them until that queued run ends (docs/reconciliation.md, "Manual work during a run")."""

from __future__ import annotations

from typing import Any

import pytest

from support.factories import Tenant
from support.reconciliation_runs import (
    bank_and_ledger,
    definition_json,
    derived,
    make_reconciliation,
    output_rows,
    run,
)
from tally.core.reconciliation import SideName
from tally.runtime import Runtime
from tally.services.reconciliation.service import ReconciliationService

FEE_ROW = 4  # bank's REF-4, 99.99: no counterpart in the ledger


def _statuses(runtime: Runtime, tenant: Tenant, record: Any) -> dict[int, str]:
    rows = output_rows(runtime, tenant, record)
    return {r["bank._row"]: r["status"] for r in rows if r["bank._row"] is not None}


def test_a_resolution_recorded_while_a_run_publishes_is_kept_and_shown_by_the_next(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    record = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    run(runtime, record)
    service = ReconciliationService(runtime.engine)
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": record.id}
    publisher = runtime.derived._publisher  # the moment between build and publish
    publish = publisher.publish_output

    def resolve_then_publish(*args: Any, **kwargs: Any) -> None:
        service.resolve(
            **ids, side=SideName.LEFT, rows=[FEE_ROW], reason="bank_fee", note="during a run"
        )
        monkeypatch.setattr(publisher, "publish_output", publish)  # once
        publish(*args, **kwargs)

    monkeypatch.setattr(publisher, "publish_output", resolve_then_publish)
    service.replace(  # a new definition: the next run is full and publishes
        workspace_id=tenant.workspace_id,
        derived_id=record.id,
        body=definition_json(left, right, name="Bank vs ledger, renamed"),
    )
    run(runtime, record)
    assert derived(runtime, record.id).run_due_at is not None  # the action's run is queued
    [resolution] = service.actions(**ids)[-1:]
    assert resolution.undone_at is None
    assert resolution.rows == (FEE_ROW,)
    last_run = run(runtime, record)
    assert last_run["counts"]["resolved_left"] == 1
    assert _statuses(runtime, tenant, record)[FEE_ROW] == "resolved"
