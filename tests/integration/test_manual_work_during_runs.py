"""An analyst's action taken while a run is between reading the manual work and
publishing (both backends): the output the run leaves shows the action at once, rows and
`last_run` alike, exactly as the run the action queued then builds it
(services/reconciliation/replay.py); whether the run published a new output or kept the
one the action had changed."""

from __future__ import annotations

from collections.abc import Callable
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
from tally.core.reconciliation_actions import ActionKind
from tally.runtime import Runtime
from tally.services.reconciliation.service import ReconciliationService

FEE_ROW = 4  # bank's REF-4, 99.99: no counterpart in the ledger
LONE_ROW = 5  # ledger's REF-9, 1.00: none in the bank
FIGURES = ("counts", "amounts", "absolute_amounts", "oldest_unmatched")
Ids = dict[str, int]


def _resolve(service: ReconciliationService, ids: Ids) -> None:
    service.resolve(**ids, side=SideName.LEFT, rows=[FEE_ROW], reason="bank_fee", note="fee")


def _match(service: ReconciliationService, ids: Ids) -> None:
    service.match(**ids, left_rows=[FEE_ROW], right_rows=[LONE_ROW], note="one payment")


def _reopen(service: ReconciliationService, ids: Ids) -> None:
    taken = service.actions(**ids)  # (a run asked for is an action too: kind `run`)
    [resolution] = [a for a in taken if a.kind is ActionKind.RESOLVE and a.undone_at is None]
    service.reopen(**ids, resolution_id=resolution.id, note="not a fee after all")


ACTIONS: dict[str, Callable[[ReconciliationService, Ids], None]] = {
    "resolve": _resolve,
    "match": _match,
    "reopen": _reopen,
}


def _shown(runtime: Runtime, tenant: Tenant, record: Any) -> set[tuple[Any, ...]]:
    """Each row of each side with its status and match id (a manual match shown at once
    lists its rows apart; the run pairs them in one output row)."""
    return {
        (side, r[f"{side}._row"], r["status"], r["match_id"])
        for r in output_rows(runtime, tenant, record)
        for side in ("bank", "ledger")
        if r[f"{side}._row"] is not None
    }


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("published", [True, False], ids=["new output", "output kept"])
def test_an_action_taken_while_a_run_publishes_is_shown_by_what_it_leaves(
    runtime: Runtime,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    action: str,
    published: bool,
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    record = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    run(runtime, record)
    service = ReconciliationService(runtime.engine)
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": record.id}
    if action == "reopen":
        _resolve(service, ids)
        run(runtime, record)
    publisher = runtime.derived._publisher  # the moment between build and publish
    name = "publish_output" if published else "publish_patch"
    publish = getattr(publisher, name)

    def act_then_publish(*args: Any, **kwargs: Any) -> None:
        ACTIONS[action](service, ids)
        monkeypatch.setattr(publisher, name, publish)  # once
        publish(*args, **kwargs)

    monkeypatch.setattr(publisher, name, act_then_publish)
    if published:  # a new definition: the next run is full and publishes its output
        body = definition_json(left, right, name="Bank vs ledger, renamed")
        service.replace(workspace_id=tenant.workspace_id, derived_id=record.id, body=body)
    during = run(runtime, record)  # (else nothing new: an incremental run, no change)
    assert during["mode"] == ("full" if published else "incremental")
    shown_at_once = _shown(runtime, tenant, record)
    left_at_once = derived(runtime, record.id)  # last_run as GET shows it now
    assert left_at_once.run_due_at is not None  # the action's run is queued
    assert left_at_once.last_run is not None
    after = run(runtime, record)
    for figure in FIGURES:
        assert left_at_once.last_run[figure] == after[figure], figure
    assert shown_at_once == _shown(runtime, tenant, record)
