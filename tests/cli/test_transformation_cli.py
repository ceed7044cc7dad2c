"""`tally admin create-transformation`, `run-transformation` and `list-transformations`:
one JSON object each, errors as every admin command prints them. On both backends."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import httpx

from support.cli import admin
from support.factories import make_tenant
from support.transformations import make_inputs, transformation
from tally.runtime import Runtime
from tally.settings import Settings


def test_create_run_and_list(
    runtime: Runtime, settings: Settings, api: httpx.Client, tmp_path: Path
) -> None:
    tenant = make_tenant(runtime.engine)
    inputs = make_inputs(runtime.engine, tenant)
    ws = str(tenant.workspace_id)
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(transformation(inputs)))
    code, created = admin(settings, "create-transformation", "--workspace", ws, "--file", str(path))
    assert code == 0, created
    assert (created["name"], created["columns"][2]) == (
        "Payouts",
        {"name": "amount", "type": "decimal"},
    )
    code, last_run = admin(settings, "run-transformation", "--id", str(created["id"]))
    assert code == 0, last_run
    assert (last_run["rows"], last_run["incremental"]) == (3, False)
    url = f"/api/v1/resources/{created['resource_id']}/data"
    page = json.loads(
        api.get(url, headers=tenant.headers, params={"ordering": "payout_id"}).content,
        parse_float=Decimal,
    )
    assert page["data"][0]["amount"] == Decimal("10.115")  # readable when the command returned
    code, listed = admin(settings, "list-transformations", "--workspace", ws)
    assert code == 0, listed
    shown = api.get(f"/api/v2/transformations/{created['id']}", headers=tenant.v2_headers)
    assert listed == {"workspace_id": tenant.workspace_id, "transformations": [shown.json()]}


def test_errors_are_printed_as_every_admin_command_prints_them(
    runtime: Runtime, settings: Settings, tmp_path: Path
) -> None:
    tenant = make_tenant(runtime.engine)
    inputs = make_inputs(runtime.engine, tenant)
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(transformation(inputs, sql="SELECT * FROM api_keys")))
    ws = str(tenant.workspace_id)
    code, printed = admin(settings, "create-transformation", "--workspace", ws, "--file", str(path))
    assert (code, printed["kind"]) == (1, "DefinitionRejectedError")
    assert printed["error"] == ("sql: no input named 'api_keys' (inputs: s) (line 1, column 15)")
    code, printed = admin(settings, "run-transformation", "--id", "987654")
    assert (code, printed["kind"]) == (1, "ResourceNotFoundError")
    code, printed = admin(settings, "list-transformations", "--workspace", "987654")
    assert (code, printed) == (
        1,
        {"error": "Workspace not found", "kind": "WorkspaceNotFoundError"},
    )
