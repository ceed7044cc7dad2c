"""Schemathesis, every check on, against both APIs of a real server on loopback.

Each operation gets a bounded, derandomized run (all phases: examples, coverage,
fuzzing, stateful), so the suite stays reproducible and finishes in a minute or two;
`TALLY_SCHEMATHESIS_EXAMPLES` raises the bound for a deeper run by hand. The run must
end clean: no 5xx, every response in its documented status, content type, headers and
schema, every schema-valid request accepted and every invalid one refused.

Credentials and the ids of real things are given as parameter overrides, so requests
get past authentication and reach the rules of each route. Some rules depend on the
database, not on the request, so no schema can state them; they are the documented 400
of their routes, and those routes' positive-data check expects it too (RULES_OF_DATA).
Rules of a body no JSON Schema can state are kept out by hooks (support/
schemathesis_hooks.py), which also point positive reconciliation definitions at a real
bank and ledger, so that some of them create reconciliations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from support.factories import make_source, make_tenant
from support.reconciliations import definition, make_pair
from tally.runtime import Runtime

EXAMPLES_PER_OPERATION = int(os.environ.get("TALLY_SCHEMATHESIS_EXAMPLES", "15"))
SEED = 20261125
RUN_TIMEOUT_SECONDS = 600
RECONCILIATIONS = "/api/v2/reconciliations"
TRANSFORMATIONS = "/api/v2/transformations"
PAIR_VARIABLE = "TALLY_SCHEMATHESIS_PAIR"  # read by the hooks, in the schemathesis process
ACCEPTED_BY_DEFAULT = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
# Operation -> why a schema-valid request may still be a 400.
RULES_OF_DATA = {
    "/api/v1/resources/{resource_id}/data": "filters, `fields` and `ordering` name columns "
    "of the resource, which the schema does not know",
    "/api/v2/webhooks": "a source name must be unique in its workspace",
    "/api/v2/sources": "a source name must be unique in its workspace",
    "/api/v2/webhooks/{webhook_id}/feed-source": "the file URL sits at the path the "
    "webhook was registered with",
    "/api/v2/reconciliations": "a definition names resources of the workspace and their "
    "columns, and a name no resource has",
    "/api/v2/reconciliations/{reconciliation_id}": "a definition names resources of the "
    "workspace and their columns, and a name no other resource has",
    "/api/v2/reconciliations/{reconciliation_id}/matches": "the rows are positions the inputs have",
    "/api/v2/reconciliations/{reconciliation_id}/resolutions": "the rows are positions the "
    "input has",
    "/api/v2/reconciliations/{reconciliation_id}/rows/{side}/{row}/candidates": "the row is "
    "a position the input has",
    "/api/v2/transformations": "a definition's inputs are resources of the workspace, its "
    "SQL reads their columns, and its name no resource has",
    "/api/v2/transformations/preview": "a definition's inputs are resources of the "
    "workspace and its SQL reads their columns",
    "/api/v2/transformations/{transformation_id}": "a definition's inputs are resources "
    "of the workspace, its SQL reads their columns, and its name no other resource has",
}
# Operation -> why a schema-valid request may still be a 422 naming a field.
VALIDATED_BY_DATA = {
    "/api/v2/reconciliations/{reconciliation_id}/matches": "rows that do not balance need "
    "a note (their amounts are the inputs')",
    "/api/v2/reconciliations/{reconciliation_id}/resolutions": "the reason is one of its "
    "definition's resolution_reasons",
}


def _config(runtime: Runtime, api: httpx.Client, directory: Path) -> tuple[Path, str]:
    """The config file, and the pair positive reconciliation definitions are pointed at."""
    tenant = make_tenant(runtime.engine, ingestion=True)
    resource = make_source(runtime.engine, tenant, "id,amount,memo\n1,10.00,a\n2,20.50,b\n")
    credentials = {
        "x-api-key": tenant.key,
        "x-svc-workspace": str(tenant.workspace_id),
        "x-svc-account": str(tenant.account_id),
    }
    hook = api.post("/api/v2/webhooks", headers=credentials, json={"name": "fed", "webhook": {}})
    assert hook.status_code == 201, hook.text
    pair = make_pair(runtime.engine, tenant)
    kept, deleted = (
        api.post(RECONCILIATIONS, headers=credentials, json=definition(pair, name=name))
        for name in ("kept", "deleted")
    )
    assert (kept.status_code, deleted.status_code) == (201, 201), kept.text + deleted.text
    read_t = api.post(
        TRANSFORMATIONS,
        headers=credentials,
        json={"name": "t read", "inputs": {"s": pair.bank}, "sql": "SELECT * FROM s"},
    )
    reader = {
        "name": "t reader",
        "inputs": {"r": read_t.json()["resource_id"]},
        "sql": "SELECT * FROM r",
    }
    reading = api.post(TRANSFORMATIONS, headers=credentials, json=reader)
    assert (read_t.status_code, reading.status_code) == (201, 201), reading.text
    overrides = {
        "header.X-API-Key": tenant.key,
        "header.workspace_id": str(tenant.workspace_id),
        **{f"header.{name}": value for name, value in credentials.items()},
        "path.resource_id": resource.id,
        "path.source_id": hook.json()["id"],
        "path.webhook_id": hook.json()["webhook_id"],
        "path.reconciliation_id": kept.json()["id"],
        # one another reads: its DELETE is always the 409, never a 404 that the stateful
        # phase would blame on a transformation it just created
        "path.transformation_id": read_t.json()["id"],
    }
    lines = [
        f"seed = {SEED}",
        "[generation]",
        "deterministic = true",
        f"max-examples = {EXAMPLES_PER_OPERATION}",
        'database = "none"',
        "[parameters]",
        *(f'"{name}" = {_toml(value)}' for name, value in overrides.items()),
    ]
    for path in RULES_OF_DATA:
        also = ["400", "422"] if path in VALIDATED_BY_DATA else ["400"]
        lines += [
            "[[operations]]",
            f'include-path = "{path}"',
            "[operations.checks.positive_data_acceptance]",
            f"expected-statuses = {[*ACCEPTED_BY_DEFAULT, *also]}".replace("'", '"'),
        ]
    lines += [  # DELETE removes one of its own: the other operations keep reaching theirs
        "[[operations]]",
        f'include-path = "{RECONCILIATIONS}/{{reconciliation_id}}"',
        'include-method = "DELETE"',
        "[operations.parameters]",
        f'"path.reconciliation_id" = {deleted.json()["id"]}',
    ]
    config = directory / "schemathesis.toml"
    config.write_text("\n".join(lines) + "\n")
    return config, json.dumps({"bank": pair.bank, "ledger": pair.ledger})


def _toml(value: object) -> str:
    return str(value) if isinstance(value, int) else f'"{value}"'


def test_schemathesis_finds_nothing(runtime: Runtime, api: httpx.Client, tmp_path: Path) -> None:
    config, pair = _config(runtime, api, tmp_path)
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{api.base_url}/api/v1/openapi.json",
        "--checks",
        "all",
        "--workers",
        "1",
    ]
    hooks = Path(__file__).parents[1] / "support" / "schemathesis_hooks.py"
    run = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(hooks), PAIR_VARIABLE: pair},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-5000:]
