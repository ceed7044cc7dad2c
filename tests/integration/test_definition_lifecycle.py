"""The definition lifecycle every kind of derived resource shares
(services/derived/lifecycle.py), on both backends and for both kinds: another
workspace's derived resource, and one of the other kind, is the kind's own 404 for get,
replace and delete; a replacement renames the output and queues a run, and is refused
when made to a definition since changed; a deletion takes the output with it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from support.factories import Tenant, make_source, make_tenant
from support.reconciliation_runs import BANK_CSV, LEDGER_CSV, definition_json
from support.transformations import make_inputs, transformation
from tally.core.errors import (
    ConflictError,
    NotFoundError,
    ReconciliationNotFoundError,
    TransformationNotFoundError,
)
from tally.runtime import Runtime
from tally.services.derived.lifecycle import DefinitionLifecycle
from tally.storage import resources

Definition = Callable[[Runtime, Tenant, str], Any]


def reconciliation(runtime: Runtime, tenant: Tenant, name: str) -> Any:
    bank = make_source(runtime.engine, tenant, BANK_CSV, name=f"{name} bank")
    ledger = make_source(runtime.engine, tenant, LEDGER_CSV, name=f"{name} ledger")
    return definition_json(bank.id, ledger.id, name=name)


def a_transformation(runtime: Runtime, tenant: Tenant, name: str) -> Any:
    return transformation(make_inputs(runtime.engine, tenant), name=name)


@dataclass(frozen=True)
class Kind:
    service: str  # the runtime's attribute
    define: Definition
    not_found: type[NotFoundError]

    def lifecycle(self, runtime: Runtime) -> DefinitionLifecycle[Any, Any]:
        found: DefinitionLifecycle[Any, Any] = getattr(runtime, self.service)
        return found

    def create(self, runtime: Runtime, tenant: Tenant, name: str) -> tuple[Any, Any]:
        """A derived resource of this kind named `name`, and its body."""
        body = self.define(runtime, tenant, name)
        return self.lifecycle(runtime).create(workspace_id=tenant.workspace_id, body=body), body


KINDS = (
    Kind("reconciliations", reconciliation, ReconciliationNotFoundError),
    Kind("transformations", a_transformation, TransformationNotFoundError),
)


@pytest.fixture(params=KINDS, ids=lambda k: k.service)
def kind(request: pytest.FixtureRequest) -> Kind:
    found: Kind = request.param
    return found


def test_another_workspaces_or_another_kinds_derived_resource_is_the_kinds_404(
    runtime: Runtime, tenant: Tenant, kind: Kind
) -> None:
    lifecycle = kind.lifecycle(runtime)
    mine, body = kind.create(runtime, tenant, "mine")
    other = make_tenant(runtime.engine)
    (other_kind,) = (k for k in KINDS if k != kind)
    theirs, _ = other_kind.create(runtime, tenant, "theirs")
    for workspace_id, derived_id in (
        (other.workspace_id, mine.id),  # another workspace's
        (tenant.workspace_id, theirs.id),  # this workspace's, of the other kind
    ):
        with pytest.raises(kind.not_found):
            lifecycle.get(workspace_id=workspace_id, derived_id=derived_id)
        with pytest.raises(kind.not_found):
            lifecycle.replace(workspace_id=workspace_id, derived_id=derived_id, body=body)
        with pytest.raises(kind.not_found):
            lifecycle.delete(workspace_id=workspace_id, derived_id=derived_id)
    assert lifecycle.list_defined(workspace_id=other.workspace_id) == []
    assert [d.id for d in lifecycle.list_defined(workspace_id=tenant.workspace_id)] == [mine.id]
    assert lifecycle.get(workspace_id=tenant.workspace_id, derived_id=mine.id) == mine


def test_a_replacement_renames_the_output_and_a_deletion_takes_it(
    runtime: Runtime, tenant: Tenant, kind: Kind
) -> None:
    lifecycle = kind.lifecycle(runtime)
    made, body = kind.create(runtime, tenant, "first")
    replaced = lifecycle.replace(
        workspace_id=tenant.workspace_id, derived_id=made.id, body={**body, "name": "second"}
    )
    assert (replaced.id, replaced.resource_id, replaced.name) == (
        made.id,
        made.resource_id,
        "second",
    )
    assert replaced.state == "queued"
    with runtime.engine.connect() as conn:
        assert resources.get_resource(conn, made.resource_id).name == "second"
    lifecycle.delete(workspace_id=tenant.workspace_id, derived_id=made.id)
    with pytest.raises(kind.not_found):
        lifecycle.get(workspace_id=tenant.workspace_id, derived_id=made.id)
    with runtime.engine.connect() as conn:
        assert resources.find_resource(conn, made.resource_id) is None


def test_a_replacement_made_to_a_definition_since_changed_is_a_conflict(
    runtime: Runtime, tenant: Tenant, kind: Kind
) -> None:
    lifecycle = kind.lifecycle(runtime)
    made, body = kind.create(runtime, tenant, "first")
    seen = made.definition  # what an editor opened
    lifecycle.replace(
        workspace_id=tenant.workspace_id, derived_id=made.id, body={**body, "name": "theirs"}
    )
    with pytest.raises(ConflictError, match="changed meanwhile"):
        lifecycle.replace(
            workspace_id=tenant.workspace_id,
            derived_id=made.id,
            body={**body, "name": "mine"},
            expected=seen,
        )
    now = lifecycle.get(workspace_id=tenant.workspace_id, derived_id=made.id)
    assert now.name == "theirs"
    mine = lifecycle.replace(
        workspace_id=tenant.workspace_id,
        derived_id=made.id,
        body={**body, "name": "mine"},
        expected=now.definition,
    )
    assert mine.name == "mine"
