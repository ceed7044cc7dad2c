"""`tally admin run-reconciliation --id ID`: runs it now, returns once the output is
readable, prints the run's `last_run` as one JSON object and keeps the run asked for in
the reconciliation's history; on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from support.factories import Tenant, read_data
from support.reconciliation_cases import split
from support.reconciliation_runs import bank_and_ledger, definition_json
from tally.cli.main import app
from tally.core.reconciliation_actions import ActionKind
from tally.runtime import Runtime


def tally(runtime: Runtime, *args: str) -> tuple[int, dict[str, Any]]:
    settings = runtime.settings
    env = {"TALLY_HOME": str(settings.home), "TALLY_LOG_LEVEL": "WARNING"}
    if settings.database_url:
        env["TALLY_DATABASE_URL"] = settings.database_url
    result = CliRunner().invoke(app, list(args), env=env)
    [line] = result.stdout.splitlines()
    return result.exit_code, json.loads(line)


def test_run_reconciliation_prints_its_last_run_once_readable(
    runtime: Runtime, tenant: Tenant, tmp_path: Path
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    definition = tmp_path / "definition.json"
    definition.write_text(json.dumps(definition_json(left, right)))
    code, created = tally(
        runtime, "admin", "create-reconciliation", "--workspace", str(tenant.workspace_id),
        "--file", str(definition),
    )  # fmt: skip
    assert code == 0, created

    code, last_run = tally(runtime, "admin", "run-reconciliation", "--id", str(created["id"]))

    assert code == 0, last_run
    assert set(last_run) == {
        "started_at", "finished_at", "inputs", "counts", "amounts", "absolute_amounts",
        "oldest_unmatched", "mode", "rows_examined", "manual_work", "phases",
    }  # fmt: skip
    assert last_run["manual_work"] == {
        "matches": 0, "rejections": 0, "carried": 0, "retired": 0, "through": None
    }  # fmt: skip
    assert (last_run["mode"], last_run["rows_examined"]) == ("full", 9)
    assert last_run["counts"]["unmatched_left"] == 1
    assert last_run["inputs"]["left"] == {"resource_id": left, "data_version": 1}
    assert last_run["amounts"]["right"] == {
        "matched": "135.50", "unmatched": "1.00", "resolved": "0.00",
        "matched_by_status": split(matched="135.50"),
    }  # fmt: skip
    assert len(read_data(runtime, tenant, created["resource_id"])) == 6  # readable
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": created["id"]}
    [asked] = runtime.reconciliations.actions(**ids)  # in its history, as the API's
    assert (asked.kind, asked.actor) == (ActionKind.RUN, "tally admin")


def test_run_reconciliation_of_an_unknown_id_is_an_error(runtime: Runtime) -> None:
    code, printed = tally(runtime, "admin", "run-reconciliation", "--id", "999")
    assert code == 1
    assert printed["kind"] == "ResourceNotFoundError"
