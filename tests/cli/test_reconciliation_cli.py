"""`tally admin create-reconciliation` and `list-reconciliations`: one JSON object each,
errors as every admin command prints them (with the definition's faults, each named).
On both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from support.cli import admin
from support.factories import make_tenant
from support.reconciliations import definition, make_pair
from tally.cli.main import app
from tally.runtime import Runtime
from tally.settings import Settings


def write(tmp_path: Path, body: Any, name: str = "definition.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(body) if not isinstance(body, str) else body)
    return str(path)


def test_create_then_list(
    runtime: Runtime, settings: Settings, api: httpx.Client, tmp_path: Path
) -> None:
    tenant = make_tenant(runtime.engine)
    pair = make_pair(runtime.engine, tenant)
    ws = str(tenant.workspace_id)
    code, created = admin(
        settings,
        "create-reconciliation",
        "--workspace",
        ws,
        "--file",
        write(tmp_path, definition(pair)),
    )
    assert code == 0, created
    assert created == {
        "id": created["id"],
        "name": "Bank vs ledger",
        "resource_id": created["resource_id"],
    }
    data = api.get(f"/api/v1/resources/{created['resource_id']}/data", headers=tenant.headers)
    assert (data.status_code, data.json()["data"]) == (200, [])
    code, listed = admin(settings, "list-reconciliations", "--workspace", ws)
    assert code == 0, listed
    shown = api.get(f"/api/v2/reconciliations/{created['id']}", headers=tenant.v2_headers).json()
    assert listed == {"workspace_id": tenant.workspace_id, "reconciliations": [shown]}
    assert shown["state"] == "queued"


def test_errors_are_printed_as_every_admin_command_prints_them(
    runtime: Runtime, settings: Settings, tmp_path: Path
) -> None:
    tenant = make_tenant(runtime.engine)
    pair = make_pair(runtime.engine, tenant)
    ws = str(tenant.workspace_id)
    body = definition(pair)
    body["passes"][1]["keys"][0]["left"] = "nope"
    body["right"]["name"] = "bank"
    code, printed = admin(
        settings, "create-reconciliation", "--workspace", ws, "--file", write(tmp_path, body)
    )
    assert code == 1
    assert printed["kind"] == "DefinitionRejectedError"
    assert printed["error"].startswith("right.name: must differ from the left side's name; ")
    assert "; passes[1].keys[0].left: resource" in printed["error"]
    shapes = {
        "not json": "is not valid JSON",
        "wrong shape": "name: Input should be a valid string",
    }
    for content, said in (("{nope", shapes["not json"]), ({"name": 3}, shapes["wrong shape"])):
        code, printed = admin(
            settings, "create-reconciliation", "--workspace", ws, "--file", write(tmp_path, content)
        )
        assert (code, printed["kind"]) == (1, "InvalidBodyError")
        assert said in printed["error"]
    missing = str(tmp_path / "missing.json")
    code, printed = admin(settings, "create-reconciliation", "--workspace", ws, "--file", missing)
    assert (code, printed["kind"]) == (1, "InvalidBodyError")
    assert "cannot read" in printed["error"]
    good = write(tmp_path, definition(pair))
    for command in (
        ["create-reconciliation", "--workspace", "987654", "--file", good],
        ["list-reconciliations", "--workspace", "987654"],
    ):
        code, printed = admin(settings, *command)
        assert (code, printed) == (
            1,
            {"error": "Workspace not found", "kind": "WorkspaceNotFoundError"},
        )


@pytest.mark.parametrize("command", ["create-reconciliation", "list-reconciliations"])
def test_help_names_the_options(command: str) -> None:
    result = CliRunner().invoke(app, ["admin", command, "--help"])
    assert result.exit_code == 0
    assert "--workspace" in result.stdout


def test_resolve_rows_and_undo_from_the_cli(
    runtime: Runtime, settings: Settings, api: httpx.Client, tmp_path: Path
) -> None:
    """`resolve-rows` and `undo-resolution`: the API's resolution, taken by `tally admin`;
    an unknown reason printed as the API names it."""
    tenant = make_tenant(runtime.engine)
    pair = make_pair(runtime.engine, tenant)
    ws = str(tenant.workspace_id)
    code, created = admin(
        settings,
        "create-reconciliation",
        "--workspace",
        ws,
        "--file",
        write(tmp_path, definition(pair)),
    )
    assert code == 0, created
    rid = str(created["id"])
    base = ["--workspace", ws, "--id", rid]
    code, made = admin(
        settings,
        "resolve-rows",
        *base,
        "--side",
        "right",
        "--row",
        "4",
        "--reason",
        "timing",
        "--note",
        "Feb",
    )
    assert code == 0, made
    assert (made["side"], made["rows"], made["reason"], made["actor"]) == (
        "right",
        [4],
        "timing",
        "tally admin",
    )
    code, refused = admin(
        settings, "resolve-rows", *base, "--side", "left", "--row", "1", "--reason", "lost"
    )
    assert code == 1
    assert "reason" in json.dumps(refused)
    code, undone = admin(settings, "undo-resolution", *base, "--resolution", str(made["id"]))
    assert code == 0, undone
    assert undone["undone_at"] is not None
    actions = api.get(f"/api/v2/reconciliations/{rid}/actions", headers=tenant.v2_headers).json()
    assert [(a["kind"], a["actor"], a["undo_actor"]) for a in actions["data"]] == [
        ("resolve", "tally admin", "tally admin")
    ]
