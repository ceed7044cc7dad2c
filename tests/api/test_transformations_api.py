"""/api/v2/transformations (issue #12, part 3) over real HTTP, on both backends: the
definition's 400s and 422s, the uniform 403, the 404s and 409s, the preview, the life of
a transformation (create, run, list, get, replace, delete) and its output through
/api/v1 (filters, ordering, exact decimals); chains with reconciliations and the cycle
refusal.

The tenant's workspace has no ingestion switch: transformations do not need one.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from support.factories import Tenant, count_resources, make_source, make_tenant
from support.transformations import FILTER_SQL, Inputs, make_inputs, transformation
from support.v2_api import FORBIDDEN, NOT_FOUND, UNKNOWN_ID, problems
from tally.runtime import Runtime
from tally.storage.derived import records as derived_records

BASE = "/api/v2/transformations"


@pytest.fixture
def inputs(runtime: Runtime, tenant: Tenant) -> Inputs:
    return make_inputs(runtime.engine, tenant)


def post(api: httpx.Client, tenant: Tenant, body: Any, path: str = BASE) -> httpx.Response:
    return api.post(path, json=body, headers=tenant.v2_headers)


def created(api: httpx.Client, tenant: Tenant, body: Any) -> dict[str, Any]:
    response = post(api, tenant, body)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def run(runtime: Runtime, derived_id: int, kind: str = "transformation") -> dict[str, Any]:
    record = runtime.derived.run_now(derived_id, kind=kind, worker="test")
    assert record.last_run is not None
    return record.last_run


def data(api: httpx.Client, tenant: Tenant, resource_id: int, **params: Any) -> Any:
    response = api.get(
        f"/api/v1/resources/{resource_id}/data", headers=tenant.headers, params=params
    )
    assert response.status_code == 200, response.text
    return json.loads(response.content, parse_float=Decimal)  # decimals as exact as sent


# --- creation, runs and the output ----------------------------------------------------------


def test_create_then_run_reads_the_rows_through_the_data_api(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    answer = created(api, tenant, transformation(inputs))
    assert answer == {
        "id": answer["id"],
        "name": "Payouts",
        "resource_id": answer["resource_id"],
        "columns": [
            {"name": "payout_id", "type": "text"},
            {"name": "currency", "type": "text"},
            {"name": "amount", "type": "decimal"},
            {"name": "payments", "type": "integer"},
            {"name": "first_date", "type": "date"},
        ],
    }
    assert data(api, tenant, answer["resource_id"])["data"] == []  # readable at once
    shown = api.get(f"{BASE}/{answer['id']}", headers=tenant.v2_headers).json()
    assert (shown["state"], shown["last_run"]) == ("queued", None)
    last_run = run(runtime, answer["id"])
    assert last_run["rows"] == 3
    assert last_run["inputs"] == {"s": {"resource_id": inputs.settlements, "data_version": 1}}
    url = f"/api/v1/resources/{answer['resource_id']}/data"
    raw = api.get(url, headers=tenant.headers, params={"ordering": "payout_id"}).content
    assert b'"amount":-5.500,' in raw  # the output's scale, every digit
    rows = data(api, tenant, answer["resource_id"], ordering="payout_id")["data"]
    assert rows == [
        {"payout_id": "PO-1", "currency": "EUR", "amount": Decimal("10.115"), "payments": 2,
         "first_date": "2024-01-05"},
        {"payout_id": "PO-2", "currency": "USD", "amount": Decimal("-5.500"), "payments": 1,
         "first_date": "2024-01-07"},
        {"payout_id": "PO-3", "currency": "EUR", "amount": Decimal("1000000.001"), "payments": 1,
         "first_date": "2024-01-09"},
    ]  # fmt: skip
    filtered = data(
        api, tenant, answer["resource_id"], currency="EUR", ordering="-amount", fields="payout_id"
    )["data"]
    assert filtered == [{"payout_id": "PO-3"}, {"payout_id": "PO-1"}]
    assert (
        data(api, tenant, answer["resource_id"], amount__gte="10.115")["meta"]["total_count"] == 2
    )
    shown = api.get(f"{BASE}/{answer['id']}", headers=tenant.v2_headers).json()
    assert (shown["state"], shown["error"], shown["last_run"]) == ("idle", None, last_run)
    assert set(last_run) >= {"started_at", "finished_at", "rows", "inputs"}


def test_preview_shows_columns_and_the_first_rows_and_creates_nothing(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    before = count_resources(runtime, tenant)
    response = post(api, tenant, transformation(inputs, sql=FILTER_SQL), BASE + "/preview")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "columns": [
            {"name": "payout_id", "type": "text"},
            {"name": "twice", "type": "decimal"},
            {"name": "status", "type": "text"},
        ],
        "rows": [
            {"payout_id": "PO-1", "twice": 20.2, "status": "SETTLED"},
            {"payout_id": "PO-1", "twice": 0.03, "status": "SETTLED"},
            {"payout_id": "PO-2", "twice": -11.0, "status": "SETTLED"},
            {"payout_id": "PO-3", "twice": 2000000.002, "status": "SETTLED"},
        ],
    }
    assert b'"twice":20.200' in response.content  # the digits as stored, exactly
    many = transformation(inputs, sql="SELECT s.payout_id FROM s, s AS t, s AS u")
    assert len(post(api, tenant, many, BASE + "/preview").json()["rows"]) == 20
    assert count_resources(runtime, tenant) == before
    assert api.get(BASE, headers=tenant.v2_headers).json()["data"] == []
    rejected = post(
        api, tenant, transformation(inputs, sql="SELECT nope FROM s"), BASE + "/preview"
    )
    assert problems(rejected, 400) == [("sql", "unknown column 'nope' (line 1, column 8)")]


def test_list_get_replace_and_delete(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    first = created(api, tenant, transformation(inputs))
    second = created(api, tenant, transformation(inputs, name="Filtered", sql=FILTER_SQL))
    listed = api.get(BASE, headers=tenant.v2_headers).json()
    assert [t["id"] for t in listed["data"]] == [first["id"], second["id"]]
    assert listed["next_after"] is None
    page = api.get(BASE, headers=tenant.v2_headers, params={"limit": 1}).json()
    assert page["next_after"] == first["id"]
    got = api.get(f"{BASE}/{first['id']}", headers=tenant.v2_headers).json()
    assert got["definition"] == transformation(inputs)
    assert got == listed["data"][0]
    run(runtime, first["id"])
    body = transformation(
        inputs, name="Payouts 2", sql="SELECT s.payout_id FROM s WHERE s.currency = 'USD'"
    )
    replaced = api.put(f"{BASE}/{first['id']}", json=body, headers=tenant.v2_headers)
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["state"], replaced.json()["name"]) == ("queued", "Payouts 2")
    run(runtime, first["id"])
    assert data(api, tenant, first["resource_id"])["data"] == [
        {"payout_id": "PO-2"},
        {"payout_id": "PO-2"},
    ]
    got = api.get(f"{BASE}/{first['id']}", headers=tenant.v2_headers).json()
    assert got["columns"] == [{"name": "payout_id", "type": "text"}]
    assert api.delete(f"{BASE}/{first['id']}", headers=tenant.v2_headers).status_code == 204
    assert api.get(f"{BASE}/{first['id']}", headers=tenant.v2_headers).status_code == 404
    gone = api.get(f"/api/v1/resources/{first['resource_id']}/data", headers=tenant.headers)
    assert gone.status_code == 404


# --- 400 and 422 --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM sqlite_master", "no input named 'sqlite_master' (inputs: s)"),
        ("SELECT * FROM pg_catalog.pg_class", "no input named 'pg_catalog.pg_class' (inputs: s)"),
        ("SELECT * FROM derived_resources", "no input named 'derived_resources' (inputs: s)"),
        ("SELECT pg_sleep(10) AS a FROM s", "the function PG_SLEEP is not allowed"),
        ("DELETE FROM s", "the SQL must be one SELECT statement, found DELETE"),
        ("SELECT s.amount / 3 AS third FROM s", "a division must state its scale, as in "
         "ROUND(a / b, 2) or CAST(a / b AS DECIMAL(18, 4)) (output column 'third')"),
    ],
)  # fmt: skip
def test_the_sql_checker_rejections_are_400s_naming_sql(
    api: httpx.Client, tenant: Tenant, inputs: Inputs, sql: str, message: str
) -> None:
    [(field, said)] = problems(post(api, tenant, transformation(inputs, sql=sql)), 400)
    assert field == "sql"
    assert said.split(" (line ")[0] == message


def test_another_workspaces_resource_is_refused_like_one_that_does_not_exist(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    other = make_tenant(runtime.engine)
    theirs = make_source(runtime.engine, other, "a\n1\n")
    answers = []
    for resource_id in (theirs.id, UNKNOWN_ID):
        body = transformation(inputs, inputs={"s": inputs.settlements, "x": resource_id})
        answers.append(problems(post(api, tenant, body), 400))
    assert answers[0] == [("inputs.x", f"no resource {theirs.id} in this workspace")]
    assert answers[1] == [("inputs.x", f"no resource {UNKNOWN_ID} in this workspace")]
    physical = transformation(inputs, sql=f"SELECT * FROM r_{theirs.id}")
    assert problems(post(api, tenant, physical), 400) == [
        ("sql", f"no input named 'r_{theirs.id}' (inputs: s) (line 1, column 15)")
    ]


def test_name_and_inputs_faults_are_400s_each_named(
    api: httpx.Client, tenant: Tenant, inputs: Inputs
) -> None:
    created(api, tenant, transformation(inputs))
    body = transformation(inputs, inputs={"S-1": inputs.settlements})
    assert [f for f, _ in problems(post(api, tenant, body), 400)] == ["name", "inputs.S-1"]
    empty = transformation(inputs, name="other", inputs={})
    assert problems(post(api, tenant, empty), 400) == [("inputs", "at least one input is needed")]
    taken = transformation(inputs, name="settlements")  # a source's name
    assert problems(post(api, tenant, taken), 400) == [
        ("name", "a resource named 'settlements' already exists")
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], None),
        ({"inputs": {"s": 1}, "sql": "SELECT 1 AS a"}, "name"),
        ({"name": "x", "inputs": [1], "sql": "SELECT 1 AS a"}, "inputs"),
        ({"name": "x", "inputs": {"s": "1"}, "sql": "SELECT 1 AS a"}, "inputs.s"),
        ({"name": "x", "inputs": {"s": 1}, "sql": 5}, "sql"),
        ({"name": "x", "inputs": {"s": 1}, "sql": "SELECT 1 AS a", "extra": 1}, "extra"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_422(
    api: httpx.Client, tenant: Tenant, body: Any, field: str | None
) -> None:
    for path in (BASE, BASE + "/preview"):
        assert [f for f, _ in problems(post(api, tenant, body, path), 422)] == [field]
    not_json = api.post(
        BASE, content=b"{", headers={**tenant.v2_headers, "content-type": "application/json"}
    )
    assert not_json.status_code == 422


# --- 403, 404 -----------------------------------------------------------------------------------


def test_the_uniform_403_and_the_404s(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    answer = created(api, tenant, transformation(inputs))
    other = make_tenant(runtime.engine)
    one = f"{BASE}/{answer['id']}"
    wrong_key = {**tenant.v2_headers, "x-api-key": other.key}
    for method, path in (("GET", BASE), ("POST", BASE), ("POST", BASE + "/preview"),
                         ("GET", one), ("PUT", one), ("DELETE", one)):  # fmt: skip
        for headers in ({}, wrong_key):
            response = api.request(method, path, headers=headers, json=transformation(inputs))
            assert (response.status_code, response.json()) == (403, FORBIDDEN), (method, path)
    for path in (one, f"{BASE}/{UNKNOWN_ID}"):
        headers = other.v2_headers if path == one else tenant.v2_headers
        for method in ("GET", "PUT", "DELETE"):
            response = api.request(method, path, headers=headers, json=transformation(inputs))
            assert (response.status_code, response.json()) == (404, NOT_FOUND), (method, path)
    assert api.get(f"{BASE}/abc", headers=tenant.v2_headers).status_code == 422


def test_preview_answers_other_methods_with_the_405_of_the_error_table(
    api: httpx.Client, tenant: Tenant
) -> None:
    """`preview` is no transformation's id: GET, PUT and DELETE are 405s naming POST,
    not 422s of an id, in the /api/v2 error body."""
    for method in ("GET", "PUT", "DELETE"):
        response = api.request(method, f"{BASE}/preview", headers=tenant.v2_headers)
        assert response.status_code == 405, method
        assert response.headers["allow"] == "POST"
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {"errors": [{"field": None, "message": "Method Not Allowed"}]}


# --- chains, 409, cycles -----------------------------------------------------------------------


def test_chains_with_reconciliations_the_409s_and_the_cycle(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    payouts = created(api, tenant, transformation(inputs))
    recon_body = reconciliation_of(payouts["resource_id"], inputs.bank)
    recon = api.post("/api/v2/reconciliations", json=recon_body, headers=tenant.v2_headers)
    assert recon.status_code == 201, recon.text
    matched = transformation(
        inputs,
        name="Matched payouts",
        inputs={"r": recon.json()["resource_id"]},
        sql='SELECT r."payouts.payout_id" AS payout, r.status FROM r ORDER BY payout',
    )
    downstream = created(api, tenant, matched)
    run(runtime, payouts["id"])
    with runtime.engine.connect() as conn:  # the refresh queued its reader
        waiting = derived_records.find_derived(conn, recon.json()["id"])
    assert waiting is not None
    assert waiting.run_due_at is not None
    run(runtime, recon.json()["id"], kind="reconciliation")
    run(runtime, downstream["id"])
    rows = data(api, tenant, downstream["resource_id"])["data"]
    assert rows == [
        {"payout": "PO-1", "status": "matched_with_difference"},
        {"payout": "PO-2", "status": "matched"},
        {"payout": "PO-3", "status": "unmatched"},
    ]
    refused = api.delete(f"{BASE}/{payouts['id']}", headers=tenant.v2_headers)
    assert problems(refused, 409) == [
        (
            None,
            f"reconciliation {recon.json()['id']} ('Bank vs payouts') reads resource "
            f"{payouts['resource_id']}: delete it or change its definition first",
        )
    ]
    assert (
        api.delete(
            f"/api/v2/reconciliations/{recon.json()['id']}", headers=tenant.v2_headers
        ).status_code
        == 409
    )
    cycle = transformation(inputs, inputs={"s": downstream["resource_id"]}, sql="SELECT * FROM s")
    answer = api.put(f"{BASE}/{payouts['id']}", json=cycle, headers=tenant.v2_headers)
    assert problems(answer, 400) == [
        (
            "inputs.s",
            f"resource {downstream['resource_id']} is computed from this transformation's "
            "output: reading it would make a cycle",
        )
    ]
    assert api.delete(f"{BASE}/{downstream['id']}", headers=tenant.v2_headers).status_code == 204
    assert (
        api.delete(
            f"/api/v2/reconciliations/{recon.json()['id']}", headers=tenant.v2_headers
        ).status_code
        == 204
    )
    assert api.delete(f"{BASE}/{payouts['id']}", headers=tenant.v2_headers).status_code == 204


def reconciliation_of(payouts: int, bank: int) -> dict[str, Any]:
    return {
        "name": "Bank vs payouts",
        "left": {"name": "payouts", "resource_id": payouts, "amount": "amount"},
        "right": {"name": "bank", "resource_id": bank, "amount": "amount"},
        "passes": [
            {
                "name": "by reference",
                "type": "one_to_one",
                "keys": [{"left": "payout_id", "right": "reference"}],
                "amount_tolerance": "0.01",
            }
        ],
    }
