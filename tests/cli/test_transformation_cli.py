"""`tally admin create-transformation`, `run-transformation` and `list-transformations`:
one JSON object each, errors as every admin command prints them. On both backends."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from support.factories import make_tenant
from support.transformations import make_inputs, transformation
from tally.cli.main import app
from tally.runtime import Runtime
from tally.settings import Settings


def tally(settings: Settings, *args: str) -> tuple[int, dict[str, Any]]:
    env = {"TALLY_HOME": str(settings.home), "TALLY_LOG_LEVEL": "WARNING"}
    if settings.database_url:
        env["TALLY_DATABASE_URL"] = settings.database_url
    result = CliRunner().invoke(app, ["admin", *args], env=env)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line, got {result.stdout!r}"
    return result.exit_code, json.loads(lines[0])


def test_create_run_and_list(
    runtime: Runtime, settings: Settings, api: httpx.Client, tmp_path: Path
) -> None:
    tenant = make_tenant(runtime.engine)
    inputs = make_inputs(runtime.engine, tenant)
    ws = str(tenant.workspace_id)
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(transformation(inputs)))
    code, created = tally(settings, "create-transformation", "--workspace", ws, "--file", str(path))
    assert code == 0, created
    assert (created["name"], created["columns"][2]) == (
        "Payouts",
        {"name": "amount", "type": "decimal"},
    )
    code, last_run = tally(settings, "run-transformation", "--id", str(created["id"]))
    assert code == 0, last_run
    assert (last_run["rows"], last_run["incremental"]) == (3, False)
    url = f"/api/v1/resources/{created['resource_id']}/data"
    page = json.loads(
        api.get(url, headers=tenant.headers, params={"ordering": "payout_id"}).content,
        parse_float=Decimal,
    )
    assert page["data"][0]["amount"] == Decimal("10.115")  # readable when the command returned
    code, listed = tally(settings, "list-transformations", "--workspace", ws)
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
    code, printed = tally(settings, "create-transformation", "--workspace", ws, "--file", str(path))
    assert (code, printed["kind"]) == (1, "DefinitionRejectedError")
    assert printed["error"] == ("sql: no input named 'api_keys' (inputs: s) (line 1, column 15)")
    code, printed = tally(settings, "run-transformation", "--id", "987654")
    assert (code, printed["kind"]) == (1, "ResourceNotFoundError")
    code, printed = tally(settings, "list-transformations", "--workspace", "987654")
    assert (code, printed) == (
        1,
        {"error": "Workspace not found", "kind": "WorkspaceNotFoundError"},
    )
