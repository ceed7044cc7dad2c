"""GET /api/v2/transformations/{id}/runs and /reconciliations/{id}/runs (both backends):
each finished run, newest first, with its outcome, rows or error; 404 for another
workspace's, as for a missing one; documented in the OpenAPI document."""

from __future__ import annotations

import httpx
import pytest

from support.factories import Tenant, make_tenant
from support.reconciliations import definition, make_pair
from support.transformations import FILTER_SQL, make_inputs, run, transformation
from support.v2_api import NOT_FOUND
from tally.core.errors import RunFailedError
from tally.runtime import Runtime


def test_a_transformations_runs_list_its_successes_and_failures(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    inputs = make_inputs(runtime.engine, tenant)
    made = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(inputs, sql=FILTER_SQL)
    )
    path = f"/api/v2/transformations/{made.id}/runs"
    assert api.get(path, headers=tenant.v2_headers).json() == {"data": []}
    last_run = run(runtime, made.id)
    failing = transformation(inputs, sql="SELECT CAST(s.currency AS INTEGER) AS n FROM s")
    runtime.transformations.replace(
        workspace_id=tenant.workspace_id, derived_id=made.id, body=failing
    )
    with pytest.raises(RunFailedError):
        runtime.derived.run_now(made.id, kind="transformation", worker="test")
    response = api.get(path, headers=tenant.v2_headers)
    assert response.status_code == 200
    failed, succeeded = response.json()["data"]
    assert (failed["outcome"], failed["rows"]) == ("failed", None)
    assert failed["error"].startswith("the query failed")
    assert succeeded == {
        "id": succeeded["id"],
        "started_at": last_run["started_at"],
        "finished_at": last_run["finished_at"],
        "outcome": "succeeded",
        "rows": 4,
        "error": None,
    }
    theirs = make_tenant(runtime.engine)
    answer = api.get(path, headers=theirs.v2_headers)
    assert (answer.status_code, answer.json()) == (404, NOT_FOUND)


def test_a_reconciliations_runs_are_listed_the_same_way(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    made = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(make_pair(runtime.engine, tenant))
    )
    runtime.derived.run_now(made.id, kind="reconciliation", worker="test")
    answer = api.get(f"/api/v2/reconciliations/{made.id}/runs", headers=tenant.v2_headers)
    assert answer.status_code == 200
    assert [r["outcome"] for r in answer.json()["data"]] == ["succeeded"]


def test_the_runs_routes_are_documented(api: httpx.Client) -> None:
    paths = api.get("/api/v1/openapi.json").json()["paths"]
    for kind, noun in (
        ("transformations", "transformation"),
        ("reconciliations", "reconciliation"),
    ):
        get = paths[f"/api/v2/{kind}/{{{noun}_id}}/runs"]["get"]
        assert get["operationId"] == f"list_{noun}_runs"
        assert {"200", "403", "404", "422"} <= set(get["responses"])
