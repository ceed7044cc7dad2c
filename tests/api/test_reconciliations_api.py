"""/api/v2/reconciliations (issue #11, part 3) over real HTTP, on both backends: the
definition's 400s and 422s, the output readable at once through /api/v1, the life of a
reconciliation (list, get, replace, delete, runs), the uniform 403, the 404s, and the
manual work (match, confirm, undo) with the actions it keeps.

The tenant's workspace has no ingestion switch: reconciliations do not need one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from support.factories import Tenant, make_source, make_tenant
from support.reconciliations import Pair, definition, make_pair, write_output
from support.v2_api import FORBIDDEN, NOT_FOUND, UNKNOWN_ID, problems
from tally.core.columns import Column, ColumnType
from tally.core.ids import hash_secret
from tally.runtime import Runtime
from tally.services.admin import AdminService, key_fingerprint
from tally.services.sources import SourceDefinition
from tally.storage import resources
from tally.storage.schema import derived_resources, reconciliation_actions

BASE = "/api/v2/reconciliations"


@pytest.fixture
def pair(runtime: Runtime, tenant: Tenant) -> Pair:
    return make_pair(runtime.engine, tenant)


def post(api: httpx.Client, tenant: Tenant, body: Any, path: str = BASE) -> httpx.Response:
    return api.post(path, json=body, headers=tenant.v2_headers)


def created(api: httpx.Client, tenant: Tenant, body: Any) -> dict[str, Any]:
    response = post(api, tenant, body)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def fields(response: httpx.Response, status: int) -> list[str | None]:
    return [field for field, _ in problems(response, status)]


# --- creation and the output ---------------------------------------------------------------


def test_create_makes_an_empty_output_readable_at_once(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    assert answer == {
        "id": answer["id"],
        "name": "Bank vs ledger",
        "resource_id": answer["resource_id"],
    }
    with runtime.engine.connect() as conn:
        output = resources.get_resource(conn, answer["resource_id"])
    assert (output.kind, output.name, output.workspace_id) == (
        "reconciliation",
        "Bank vs ledger",
        tenant.workspace_id,
    )
    assert output.columns == (
        Column("match_id", "c0", ColumnType.INTEGER),
        Column("status", "c1", ColumnType.TEXT),
        Column("pass", "c2", ColumnType.TEXT),
        Column("difference", "c3", ColumnType.DECIMAL, 2),
        Column("reason", "c4", ColumnType.TEXT),
        Column("bank._row", "c5", ColumnType.INTEGER),
        Column("bank.reference", "c6", ColumnType.TEXT),
        Column("bank.amount", "c7", ColumnType.DECIMAL, 2),
        Column("bank.txn_date", "c8", ColumnType.DATE),
        Column("bank.memo", "c9", ColumnType.TEXT),
        Column("ledger._row", "c10", ColumnType.INTEGER),
        Column("ledger.reference", "c11", ColumnType.TEXT),
        Column("ledger.amount", "c12", ColumnType.DECIMAL, 2),
        Column("ledger.txn_date", "c13", ColumnType.DATE),
    )
    url = f"/api/v1/resources/{answer['resource_id']}/data"
    empty = api.get(url, headers=tenant.headers)
    assert empty.status_code == 200, empty.text
    assert empty.json()["data"] == []
    dotted = api.get(
        url,
        headers=tenant.headers,
        params={
            "bank.amount__gte": "100",
            "status": "unmatched",
            "ordering": "-difference",
            "fields": "match_id,bank._row,ledger.reference",
        },
    )
    assert dotted.status_code == 200, dotted.text
    assert dotted.json()["data"] == []
    unknown = api.get(url, headers=tenant.headers, params={"fields": "bank.nope"})
    assert unknown.status_code == 400


def test_get_and_list_show_the_canonical_definition_and_a_queued_run(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    got = api.get(f"{BASE}/{answer['id']}", headers=tenant.v2_headers)
    assert got.status_code == 200, got.text
    shown = got.json()
    assert {k: shown[k] for k in ("id", "name", "resource_id", "state", "error", "last_run")} == {
        **answer,
        "state": "queued",
        "error": None,
        "last_run": None,
    }
    first, second, split, loose = shown["definition"]["passes"]
    assert first == {
        "name": "same reference",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference", "normalize": ["trim", "casefold"]}],
        "amount_tolerance": "0",
        "date_window": [0, 0],
        "auto_confirm": True,
    }
    assert second["amount_tolerance"] == "0.05"
    assert second["date_window"] == [-3, 3]
    assert split["keys"] == [{"left": "reference", "right": "reference", "normalize": []}]
    assert loose["auto_confirm"] is False
    assert shown["definition"]["left"] == {
        "name": "bank",
        "resource_id": pair.bank,
        "amount": "amount",
        "date": "txn_date",
    }
    other = created(api, tenant, definition(pair, name="Second"))
    listed = api.get(BASE, headers=tenant.v2_headers)
    assert listed.status_code == 200
    assert [r["id"] for r in listed.json()["data"]] == [answer["id"], other["id"]]
    assert listed.json()["data"][0] == shown
    assert listed.json()["next_after"] is None
    page = api.get(BASE, headers=tenant.v2_headers, params={"limit": 1}).json()
    assert ([r["id"] for r in page["data"]], page["next_after"]) == ([answer["id"]], answer["id"])
    rest = api.get(BASE, headers=tenant.v2_headers, params={"after": answer["id"]}).json()
    assert [r["id"] for r in rest["data"]] == [other["id"]]


def test_a_workspace_needs_no_ingestion_switch(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    assert post(api, tenant, {"name": "src"}, "/api/v2/sources").status_code == 403
    assert post(api, tenant, definition(pair)).status_code == 201


def test_sides_without_amounts_or_dates_and_integer_amounts(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    left = make_source(runtime.engine, tenant, "ref,cents,at\nA,100,2024-01-01T10:00:00\n")
    right = make_source(runtime.engine, tenant, "ref,total\nA,1.005\n")
    keys = [{"left": "ref", "right": "ref"}]
    plain = {
        "name": "keys only",
        "left": {"name": "a", "resource_id": left.id},
        "right": {"name": "b", "resource_id": right.id},
        "passes": [{"name": "p", "type": "many_to_one", "keys": keys}],
    }
    created(api, tenant, plain)
    typed = {
        "name": "typed",
        "left": {"name": "a", "resource_id": left.id, "amount": "cents", "date": "at"},
        "right": {"name": "b", "resource_id": right.id, "amount": "total"},
        "passes": [{"name": "p", "type": "one_to_one", "keys": keys}],
    }
    assert fields(post(api, tenant, typed), 400) == ["right.date"]
    del typed["left"]["date"]  # type: ignore[attr-defined]
    typed["passes"][0]["amount_tolerance"] = "0.0001"  # type: ignore[index]
    answer = created(api, tenant, typed)
    with runtime.engine.connect() as conn:
        output = resources.get_resource(conn, answer["resource_id"])
    assert output.columns[3] == Column("difference", "c3", ColumnType.DECIMAL, 4)
    assert output.columns[7] == Column("a.cents", "c7", ColumnType.INTEGER)
    assert output.columns[8] == Column("a.at", "c8", ColumnType.TIMESTAMP)


# --- 400: faults of meaning, each named -----------------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        *parents, last = path.replace("]", "").replace("[", ".").split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return change


_DELETE = object()
FAULTS = {
    "side name with a dot": (_set("left.name", "ba.nk"), "left.name"),
    "side name too long": (_set("right.name", "x" * 41), "right.name"),
    "side name empty": (_set("right.name", ""), "right.name"),
    "side names equal": (_set("right.name", "bank"), "right.name"),
    "unknown resource": (_set("left.resource_id", UNKNOWN_ID), "left.resource_id"),
    "resource id zero": (_set("right.resource_id", 0), "right.resource_id"),
    "unknown amount column": (_set("left.amount", "nope"), "left.amount"),
    "text amount": (_set("right.amount", "reference"), "right.amount"),
    "amount on one side": (_set("right.amount", None), "right.amount"),  # and its tolerance
    "text date": (_set("left.date", "memo"), "left.date"),
    "decimal date": (_set("right.date", "amount"), "right.date"),
    "unknown key column": (_set("passes[1].keys[0].left", "nope"), "passes[1].keys[0].left"),
    "unknown right key": (_set("passes[2].keys[0].right", "memo"), "passes[2].keys[0].right"),
    "negative tolerance": (
        _set("passes[1].amount_tolerance", "-0.05"),
        "passes[1].amount_tolerance",
    ),
    "tolerance not a number": (
        _set("passes[1].amount_tolerance", "abc"),
        "passes[1].amount_tolerance",
    ),
    "tolerance exponent": (
        _set("passes[1].amount_tolerance", "5E-2"),
        "passes[1].amount_tolerance",
    ),
    "window reversed": (_set("passes[1].date_window", [3, -3]), "passes[1].date_window"),
    "window of three": (_set("passes[1].date_window", [-1, 0, 1]), "passes[1].date_window"),
    "window of halves": (_set("passes[1].date_window", [-1.5, 1]), "passes[1].date_window"),
    "window of booleans": (_set("passes[1].date_window", [False, True]), "passes[1].date_window"),
    "window of text": (_set("passes[1].date_window", ["-1", "1"]), "passes[1].date_window"),
    "window too wide": (_set("passes[1].date_window", [-99999, 1]), "passes[1].date_window"),
    "unknown normaliser": (
        _set("passes[0].keys[0].normalize", ["trim", "upper"]),
        "passes[0].keys[0].normalize[1]",
    ),
    "unknown type": (_set("passes[2].type", "many_to_many"), "passes[2].type"),
    "empty passes": (_set("passes", []), "passes"),
    "no keys in one_to_many": (_set("passes[2].keys", []), "passes[2].keys"),
    "duplicate pass names": (_set("passes[3].name", "same reference"), "passes[3].name"),
    "pass named manual": (_set("passes[0].name", "manual"), "passes[0].name"),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_each_fault_is_a_400_naming_its_field(
    api: httpx.Client, tenant: Tenant, pair: Pair, fault: str
) -> None:
    change, field = FAULTS[fault]
    body = definition(pair)
    change(body)
    named = fields(post(api, tenant, body), 400)
    if fault == "amount on one side":  # a tolerance needs amounts on both sides
        assert named == [field, "passes[1].amount_tolerance"]
    else:
        assert named == [field]


def test_every_fault_is_named_at_once(api: httpx.Client, tenant: Tenant, pair: Pair) -> None:
    body = definition(pair)
    for fault in (
        "side name with a dot",
        "text date",
        "unknown key column",
        "window reversed",
        "unknown normaliser",
        "unknown type",
        "duplicate pass names",
    ):
        FAULTS[fault][0](body)
    assert fields(post(api, tenant, body), 400) == [
        "left.name",
        "left.date",
        "passes[0].keys[0].normalize[1]",
        "passes[1].keys[0].left",
        "passes[1].date_window",
        "passes[2].type",
        "passes[3].name",
    ]


def test_tolerance_and_window_need_amounts_and_dates(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    body = definition(pair)
    for side in ("left", "right"):
        body[side]["amount"] = None
        del body[side]["date"]
    assert fields(post(api, tenant, body), 400) == [
        "passes[1].amount_tolerance",
        "passes[1].date_window",
        "passes[3].date_window",
    ]
    body["passes"][1]["amount_tolerance"] = "0.00"  # the defaults stand without them
    body["passes"][1]["date_window"] = [0, 0]
    body["passes"][3]["date_window"] = [0, 0]
    assert post(api, tenant, body).status_code == 201


def test_resources_outside_the_workspace_get_one_answer(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    other = make_tenant(runtime.engine)
    foreign = make_source(runtime.engine, other, "reference,amount,txn_date\nA,1.00,2024-01-01\n")
    answers = []
    for resource_id in (foreign.id, UNKNOWN_ID, 2**40, -1):
        body = definition(pair)
        body["right"]["resource_id"] = resource_id
        [(field, message)] = problems(post(api, tenant, body), 400)
        assert field == "right.resource_id"
        answers.append(message.replace(str(resource_id), "N"))
    assert len(set(answers)) == 1, answers


def test_a_placeholder_source_is_refused_until_it_has_columns(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    waiting = runtime.sources.create_source(
        workspace_id=tenant.workspace_id, definition=SourceDefinition("webhook feed")
    )
    body = definition(pair)
    body["left"]["resource_id"] = waiting.id
    [(field, message)] = problems(post(api, tenant, body), 400)
    assert field == "left.resource_id"
    assert "no columns yet" in message


def test_a_column_named_row_would_clash_with_the_position(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    clashing = make_source(runtime.engine, tenant, "_row,reference\n1,A\n")
    body = definition(pair, left={"name": "bank", "resource_id": clashing.id})
    body["right"] = {"name": "ledger", "resource_id": pair.ledger}
    body["passes"] = [{"name": "p", "type": "one_to_one", "keys": body["passes"][0]["keys"]}]
    assert fields(post(api, tenant, body), 400) == ["left.resource_id"]


def test_a_name_taken_by_any_resource_of_the_workspace(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    assert fields(post(api, tenant, definition(pair, name="bank")), 400) == ["name"]
    created(api, tenant, definition(pair))
    assert fields(post(api, tenant, definition(pair)), 400) == ["name"]


# --- 422: not the shape -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (_set("name", 3), "name"),
        (_set("name", ""), "name"),
        (_set("name", "a\u0000b"), "name"),
        (_set("left", _DELETE), "left"),
        (_set("left.resource_id", "2"), "left.resource_id"),
        (_set("left.resource_id", True), "left.resource_id"),
        (_set("right.amount", 5), "right.amount"),
        (_set("passes", {"a": 1}), "passes"),
        (_set("passes[0].type", _DELETE), "passes[0].type"),
        (_set("passes[1].amount_tolerance", 0.05), "passes[1].amount_tolerance"),
        (_set("passes[1].date_window", "3"), "passes[1].date_window"),
        (_set("passes[3].auto_confirm", "no"), "passes[3].auto_confirm"),
        (_set("passes[0].keys[0].normalize", "trim"), "passes[0].keys[0].normalize"),
        (_set("passes[0].keys[0].colour", "red"), "passes[0].keys[0].colour"),
        (_set("extra", 1), "extra"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_422_naming_the_field(
    api: httpx.Client, tenant: Tenant, pair: Pair, change: Callable[[Any], None], field: str
) -> None:
    body = definition(pair)
    change(body)
    assert fields(post(api, tenant, body), 422) == [field]


def test_not_json_and_not_an_object_are_422(api: httpx.Client, tenant: Tenant) -> None:
    headers = {**tenant.v2_headers, "content-type": "application/json"}
    assert fields(api.post(BASE, content=b"{nope", headers=headers), 422) == [None]
    assert fields(api.post(BASE, content=b"[]", headers=headers), 422) == [None]


def test_a_whole_number_spelled_with_a_fraction_is_an_integer(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    body = definition(pair)
    body["left"]["resource_id"] = float(pair.bank)
    body["passes"][1]["date_window"] = [-3.0, 3.0]
    answer = created(api, tenant, body)
    got = api.get(f"{BASE}/{answer['id']}", headers=tenant.v2_headers).json()
    assert got["definition"]["left"]["resource_id"] == pair.bank
    assert got["definition"]["passes"][1]["date_window"] == [-3, 3]


# --- replace, delete, runs ---------------------------------------------------------------


def test_put_replaces_the_definition_and_renames_the_output(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    url = f"{BASE}/{answer['id']}"
    _idle(runtime, answer["id"])
    body = definition(pair, name="Renamed")
    body["passes"] = body["passes"][:1]
    replaced = api.put(url, json=body, headers=tenant.v2_headers)
    assert replaced.status_code == 200, replaced.text
    shown = replaced.json()
    assert shown["name"] == "Renamed"
    assert shown["state"] == "queued"
    assert [p["name"] for p in shown["definition"]["passes"]] == ["same reference"]
    assert api.get(url, headers=tenant.v2_headers).json() == shown
    with runtime.engine.connect() as conn:
        assert resources.get_resource(conn, answer["resource_id"]).name == "Renamed"
    body["passes"][0]["type"] = "sideways"
    assert fields(api.put(url, json=body, headers=tenant.v2_headers), 400) == ["passes[0].type"]
    assert fields(api.put(url, json={"name": "x"}, headers=tenant.v2_headers), 422) == [
        "left",
        "right",
        "passes",
    ]
    taken = definition(pair, name="ledger")
    assert fields(api.put(url, json=taken, headers=tenant.v2_headers), 400) == ["name"]


def test_put_cannot_read_its_own_output_or_a_loop(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    first = created(api, tenant, definition(pair))
    reads_first = definition(pair, name="Second")
    reads_first["left"] = {"name": "bank", "resource_id": pair.bank}
    reads_first["right"] = {"name": "recon", "resource_id": first["resource_id"]}
    reads_first["passes"] = [
        {
            "name": "p",
            "type": "one_to_one",
            "keys": [{"left": "reference", "right": "bank.reference"}],
        }
    ]
    second = created(api, tenant, reads_first)
    messages = []
    for output in (first["resource_id"], second["resource_id"]):
        body = definition(pair)
        body["left"] = reads_first["left"]
        body["right"] = {"name": "recon", "resource_id": output}
        body["passes"] = reads_first["passes"]
        put = api.put(f"{BASE}/{first['id']}", json=body, headers=tenant.v2_headers)
        [(field, message)] = problems(put, 400)
        assert field == "right.resource_id"
        messages.append(message.replace(str(output), "N"))
    assert messages == [messages[0]] * 2
    refused = api.delete(f"{BASE}/{first['id']}", headers=tenant.v2_headers)
    assert problems(refused, 409) == [  # the reader named with its kind and name
        (
            None,
            f"reconciliation {second['id']} ({second['name']!r}) reads resource "
            f"{first['resource_id']}: delete it or change its definition first",
        )
    ]
    assert api.delete(f"{BASE}/{second['id']}", headers=tenant.v2_headers).status_code == 204
    assert api.delete(f"{BASE}/{first['id']}", headers=tenant.v2_headers).status_code == 204


def test_delete_removes_the_reconciliation_its_actions_and_its_output(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    url = f"{BASE}/{answer['id']}"
    match = {"left_rows": [1], "right_rows": [1]}
    assert api.post(f"{url}/matches", json=match, headers=tenant.v2_headers).status_code == 201
    deleted = api.delete(url, headers=tenant.v2_headers)
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert api.get(url, headers=tenant.v2_headers).json() == NOT_FOUND
    assert api.delete(url, headers=tenant.v2_headers).status_code == 404
    data = api.get(f"/api/v1/resources/{answer['resource_id']}/data", headers=tenant.headers)
    assert data.status_code == 404
    with runtime.engine.connect() as conn:
        assert resources.find_resource(conn, answer["resource_id"]) is None
        assert not sa.inspect(conn).has_table(f"r_{answer['resource_id']}")
        assert _count(conn, reconciliation_actions) == 0
        assert _count(conn, derived_resources) == 0
    assert created(api, tenant, definition(pair))["name"] == "Bank vs ledger"  # name free


def test_runs_queue_a_run_now_and_revive_a_failed_one(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    with runtime.engine.begin() as conn:
        conn.execute(
            sa.update(derived_resources).values(
                state="failed", error="boom", attempts=5, run_due_at=None
            )
        )
    url = f"{BASE}/{answer['id']}"
    assert api.get(url, headers=tenant.v2_headers).json()["state"] == "failed"
    queued = api.post(f"{url}/runs", headers=tenant.v2_headers)
    assert queued.status_code == 202, queued.text
    assert queued.json() == {"id": answer["id"], "state": "queued"}
    with runtime.engine.connect() as conn:
        row = conn.execute(sa.select(derived_resources)).one()
    assert (row.state, row.attempts, row.run_due_at is not None) == ("queued", 0, True)


# --- 403 and 404 ------------------------------------------------------------------------


def _routes(rid: int, match_id: int = 1) -> list[tuple[str, str, Any]]:
    one = f"{BASE}/{rid}"
    return [
        ("POST", BASE, {}),
        ("GET", BASE, None),
        ("GET", one, None),
        ("PUT", one, {}),
        ("DELETE", one, None),
        ("POST", f"{one}/runs", None),
        ("POST", f"{one}/matches", {"left_rows": [1], "right_rows": [1]}),
        ("POST", f"{one}/matches/{match_id}/confirm", None),
        ("DELETE", f"{one}/matches/{match_id}", None),
        ("GET", f"{one}/actions", None),
        ("POST", f"{one}/resolutions", {"side": "left", "rows": [1], "reason": "timing"}),
        ("DELETE", f"{one}/resolutions/1", None),
        ("GET", f"{one}/rows/left/1/candidates", None),
    ]


def test_every_route_answers_the_uniform_403(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    rid = created(api, tenant, definition(pair))["id"]
    other = make_tenant(runtime.engine)
    good = tenant.v2_headers
    wrong = [
        {},
        {k: v for k, v in good.items() if k != "x-api-key"},
        {k: v for k, v in good.items() if k != "x-svc-account"},
        {**good, "x-api-key": "nope"},
        {**good, "x-svc-workspace": str(other.workspace_id)},
        {**good, "x-svc-account": str(other.account_id)},
        {**good, "x-svc-workspace": "one"},
        other.v2_headers | {"x-svc-workspace": str(tenant.workspace_id)},
    ]
    for method, path, body in _routes(rid):
        for headers in wrong:
            response = api.request(method, path, json=body, headers=headers)
            assert (response.status_code, response.json()) == (403, FORBIDDEN), (method, path)


def test_another_workspaces_reconciliation_is_404(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    rid = created(api, tenant, definition(pair))["id"]
    other = make_tenant(runtime.engine)
    other_pair = make_pair(runtime.engine, other)
    for method, path, body in _routes(rid)[2:]:
        if method == "PUT":
            body = definition(other_pair)
        response = api.request(method, path, json=body, headers=other.v2_headers)
        assert (response.status_code, response.json()) == (404, NOT_FOUND), (method, path)
    for unknown in (UNKNOWN_ID, 2**40, 0):
        for method, path, body in _routes(unknown)[2:]:
            body = definition(pair) if method == "PUT" else body
            response = api.request(method, path, json=body, headers=tenant.v2_headers)
            assert response.status_code == 404, (method, path, response.text)


# --- manual work ------------------------------------------------------------------------


def _actions(api: httpx.Client, tenant: Tenant, rid: int) -> list[dict[str, Any]]:
    response = api.get(f"{BASE}/{rid}/actions", headers=tenant.v2_headers)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


def test_a_manual_match_is_kept_with_its_fingerprint_and_note(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    rid = created(api, tenant, definition(pair))["id"]
    _idle(runtime, rid)
    url = f"{BASE}/{rid}/matches"
    body = {"left_rows": [3], "right_rows": [4, 3], "note": "split refund, see ticket 12"}
    answer = api.post(url, json=body, headers=tenant.v2_headers)
    assert answer.status_code == 201, answer.text
    assert answer.json() == {"match_id": 3}
    [action] = _actions(api, tenant, rid)
    assert action == {
        "id": action["id"],
        "kind": "match",
        "match_id": 3,
        "left_rows": [3],
        "right_rows": [3, 4],
        # sha256 of the rows' stored content: the same on both backends
        "fingerprint": "7f559feda3c2d78ebbc9419b3597285559027f9dbb3d2a827ed54300fc77bc6e",
        "note": "split refund, see ticket 12",
        "created_at": action["created_at"],
        "undone_at": None,
        "undo_note": None,
        "retired_reason": None,
        "carried_from": None,
        "actor": f"api key {key_fingerprint(hash_secret(tenant.key))}",
        "undo_actor": None,
        "reason": None,
    }
    assert action["actor"].startswith("api key sha256:")
    assert tenant.key not in answer.text + str(action)
    assert api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()["state"] == "queued"
    again = {"left_rows": [1, 3], "right_rows": [4, 2]}
    assert problems(api.post(url, json=again, headers=tenant.v2_headers), 409) == [
        ("left_rows[1]", "left row 3 is already in manual match 3"),
        ("right_rows[0]", "right row 4 is already in manual match 3"),
    ]
    assert len(_actions(api, tenant, rid)) == 1


def test_a_match_naming_a_row_not_in_its_input_is_400_naming_side_and_row(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    """Rows that do not exist are a fault of the request (400), whatever else is wrong
    with it; rows already in a manual match are a conflict (409) only once every row
    exists."""
    rid = created(api, tenant, definition(pair))["id"]
    url = f"{BASE}/{rid}/matches"
    noted = {"left_rows": [3], "right_rows": [3], "note": "0.25 of fees"}
    first = api.post(url, json=noted, headers=tenant.v2_headers)
    assert first.status_code == 201, first.text
    body = {"left_rows": [7, 3], "right_rows": [2, 9]}
    assert problems(api.post(url, json=body, headers=tenant.v2_headers), 400) == [
        ("left_rows[0]", "left row 7 does not exist: bank has 3 rows"),
        ("right_rows[1]", "right row 9 does not exist: ledger has 4 rows"),
    ]
    assert len(_actions(api, tenant, rid)) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"left_rows": [], "right_rows": [1]}, "left_rows"),
        ({"left_rows": [1]}, "right_rows"),
        ({"left_rows": [0], "right_rows": [1]}, "left_rows[0]"),
        ({"left_rows": [1, 1], "right_rows": [1]}, "left_rows"),
        ({"left_rows": ["1"], "right_rows": [1]}, "left_rows[0]"),
        ({"left_rows": [1], "right_rows": [1], "note": 5}, "note"),
        ({"left_rows": [1], "right_rows": [1], "colour": "red"}, "colour"),
    ],
)
def test_a_match_of_the_wrong_shape_is_422(
    api: httpx.Client, tenant: Tenant, pair: Pair, body: dict[str, Any], field: str
) -> None:
    rid = created(api, tenant, definition(pair))["id"]
    response = api.post(f"{BASE}/{rid}/matches", json=body, headers=tenant.v2_headers)
    assert fields(response, 422) == [field.replace("[0]", ".0")] or fields(response, 422) == [field]


def test_undo_dissolves_a_manual_match_and_frees_its_rows(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    rid = created(api, tenant, definition(pair))["id"]
    url = f"{BASE}/{rid}/matches"
    body = {"left_rows": [2], "right_rows": [2]}
    assert api.post(url, json=body, headers=tenant.v2_headers).json() == {"match_id": 2}
    _idle(runtime, rid)
    undone = api.delete(f"{url}/2", headers=tenant.v2_headers)
    assert undone.status_code == 200, undone.text
    assert undone.json() == {"match_id": 2, "outcome": "dissolved"}
    assert api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()["state"] == "queued"
    [action] = _actions(api, tenant, rid)
    assert action["undone_at"] is not None
    assert api.delete(f"{url}/2", headers=tenant.v2_headers).json() == NOT_FOUND
    assert api.post(url, json=body, headers=tenant.v2_headers).status_code == 201
    assert [a["undone_at"] is None for a in _actions(api, tenant, rid)] == [False, True]


def test_confirm_and_reject_act_on_the_current_output(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    rid, url = answer["id"], f"{BASE}/{answer['id']}/matches"
    write_output(
        runtime.engine,
        answer["resource_id"],
        [
            {
                "match_id": 1,
                "status": "matched",
                "pass": "same reference",
                "bank._row": 1,
                "ledger._row": 1,
            },
            {
                "match_id": 2,
                "status": "suggested",
                "pass": "loose",
                "bank._row": 2,
                "ledger._row": 2,
            },
            {
                "match_id": 3,
                "status": "matched_with_difference",
                "pass": "split payments",
                "bank._row": 3,
                "ledger._row": 3,
            },
            {
                "match_id": 3,
                "status": "matched_with_difference",
                "pass": "split payments",
                "bank._row": 3,
                "ledger._row": 4,
            },
        ],
    )
    headers = tenant.v2_headers
    refused = api.post(f"{url}/1/confirm", headers=headers)
    assert problems(refused, 409) == [
        ("match_id", "match 1 is matched: only a suggested match can be confirmed")
    ]
    assert api.post(f"{url}/7/confirm", headers=headers).json() == NOT_FOUND
    assert api.post(f"{url}/{2**63}/confirm", headers=headers).status_code == 404
    confirmed = api.post(f"{url}/2/confirm", headers=headers)
    assert (confirmed.status_code, confirmed.json()) == (200, {"match_id": 2})
    assert problems(api.post(f"{url}/2/confirm", headers=headers), 409) == [
        ("match_id", "left row 2 is already in manual match 2"),
        ("match_id", "right row 2 is already in manual match 2"),
    ]
    rejected = api.delete(f"{url}/3", headers=headers)
    assert rejected.json() == {"match_id": 3, "outcome": "rejected"}
    assert api.delete(f"{url}/3", headers=headers).json()["outcome"] == "rejected"  # once
    assert api.delete(f"{url}/2", headers=headers).json()["outcome"] == "dissolved"
    assert api.delete(f"{url}/2", headers=headers).json()["outcome"] == "rejected"
    assert api.delete(f"{url}/9", headers=headers).json() == NOT_FOUND
    kept = [
        (a["kind"], a["left_rows"], a["right_rows"], a["undone_at"] is None)
        for a in _actions(api, tenant, rid)
    ]
    assert kept == [
        ("confirm", [2], [2], False),
        ("reject", [3], [3, 4], True),
        ("reject", [2], [2], True),
    ]
    with runtime.engine.connect() as conn:
        stored = conn.execute(sa.select(reconciliation_actions).order_by("id")).all()
    assert [len(s.fingerprint) for s in stored] == [64, 64, 64]


def test_confirm_and_undo_keep_an_optional_note(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    rid, url = answer["id"], f"{BASE}/{answer['id']}/matches"
    write_output(
        runtime.engine,
        answer["resource_id"],
        [
            {"match_id": m, "status": "suggested", "pass": "p", "bank._row": m, "ledger._row": m}
            for m in (1, 2, 3)
        ],
    )
    headers = tenant.v2_headers
    for body in ({"note": 5}, {"reason": "x"}, [], "text"):
        assert fields(api.post(f"{url}/1/confirm", json=body, headers=headers), 422)
        assert fields(api.request("DELETE", f"{url}/1", json=body, headers=headers), 422)
    assert problems(api.post(f"{url}/1/confirm", content=b"{", headers=headers), 422)
    too_long = {"note": "x" * 10_001}
    assert fields(api.post(f"{url}/1/confirm", json=too_long, headers=headers), 422) == ["note"]
    confirmed = api.post(f"{url}/1/confirm", json={"note": "seen the invoice"}, headers=headers)
    assert (confirmed.status_code, confirmed.json()) == (200, {"match_id": 1})
    assert api.post(f"{url}/2/confirm", json={}, headers=headers).status_code == 200
    assert api.post(f"{url}/3/confirm", json={"note": None}, headers=headers).status_code == 200
    # another key of the workspace (a colleague's integration) dissolves the first match
    other_key = AdminService(runtime.engine).create_api_key(tenant.workspace_id).key
    other = {**headers, "x-api-key": other_key}
    dissolved = api.request("DELETE", f"{url}/1", json={"note": "wrong invoice"}, headers=other)
    assert dissolved.json() == {"match_id": 1, "outcome": "dissolved"}
    assert api.delete(f"{url}/2", headers=headers).json()["outcome"] == "dissolved"
    rejected = api.request("DELETE", f"{url}/3", json={"note": "not ours"}, headers=headers)
    assert rejected.json() == {"match_id": 3, "outcome": "dissolved"}
    rejected = api.request("DELETE", f"{url}/3", json={"note": "never"}, headers=headers)
    assert rejected.json() == {"match_id": 3, "outcome": "rejected"}
    kept = [
        (a["kind"], a["match_id"], a["note"], a["undone_at"] is None, a["undo_note"])
        for a in _actions(api, tenant, rid)
    ]
    assert kept == [
        ("confirm", 1, "seen the invoice", False, "wrong invoice"),
        ("confirm", 2, None, False, None),
        ("confirm", 3, None, False, "not ours"),
        ("reject", 3, "never", True, None),
    ]
    mine, theirs = (f"api key {key_fingerprint(hash_secret(k))}" for k in (tenant.key, other_key))
    assert [(a["actor"], a["undo_actor"]) for a in _actions(api, tenant, rid)] == [
        (mine, theirs),
        (mine, mine),
        (mine, mine),
        (mine, None),
    ]


def test_a_put_that_changes_a_side_retires_the_manual_work(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    url = f"{BASE}/{answer['id']}"
    match = {"left_rows": [1], "right_rows": [1]}
    assert api.post(f"{url}/matches", json=match, headers=tenant.v2_headers).status_code == 201
    same_inputs = definition(pair, name="Renamed")
    assert api.put(url, json=same_inputs, headers=tenant.v2_headers).status_code == 200
    assert _actions(api, tenant, answer["id"])[0]["undone_at"] is None
    ledger2 = make_source(runtime.engine, tenant, "reference,amount,txn_date\nA,1.00,2024-01-01\n")
    moved = definition(pair, name="Renamed")
    moved["right"]["resource_id"] = ledger2.id
    assert api.put(url, json=moved, headers=tenant.v2_headers).status_code == 200
    assert _actions(api, tenant, answer["id"])[0]["undone_at"] is not None


# --- helpers -----------------------------------------------------------------------------


def _idle(runtime: Runtime, rid: int) -> None:
    """As after a run: idle, nothing due."""
    with runtime.engine.begin() as conn:
        conn.execute(
            sa.update(derived_resources)
            .where(derived_resources.c.id == rid)
            .values(state="idle", run_due_at=None)
        )


def _count(conn: sa.Connection, table: sa.Table) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


# --- manual work through real runs ------------------------------------------------------


def _run(runtime: Runtime, rid: int) -> None:
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")


def _output(api: httpx.Client, tenant: Tenant, resource_id: int) -> list[tuple[Any, ...]]:
    response = api.get(
        f"/api/v1/resources/{resource_id}/data",
        headers=tenant.headers,
        params={"fields": "match_id,status,pass,bank._row,ledger._row"},
    )
    assert response.status_code == 200, response.text
    return [tuple(row.values()) for row in response.json()["data"]]


def test_manual_work_holds_through_runs(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = created(api, tenant, definition(pair))
    rid, output, url = answer["id"], answer["resource_id"], f"{BASE}/{answer['id']}/matches"
    headers = tenant.v2_headers
    _run(runtime, rid)
    shown = api.get(f"{BASE}/{rid}", headers=headers).json()
    assert shown["state"] == "idle"
    assert shown["last_run"]["counts"]["matched"] == 3
    assert _output(api, tenant, output) == [
        (1, "matched", "same reference", 1, 1),
        (2, "matched", "reference, small differences", 2, 2),
        (3, "matched", "split payments", 3, 3),
        (3, "matched", "split payments", 3, 4),
    ]
    assert (
        api.post(url, json={"left_rows": [2], "right_rows": [2]}, headers=headers).status_code
        == 201
    )
    assert api.delete(f"{url}/3", headers=headers).json()["outcome"] == "rejected"
    _run(runtime, rid)
    assert _output(api, tenant, output) == [
        (1, "matched", "same reference", 1, 1),
        (2, "manual", "manual", 2, 2),
        (None, "unmatched", None, 3, None),
        (None, "unmatched", None, None, 3),
        (None, "unmatched", None, None, 4),
    ]
    assert api.delete(f"{url}/2", headers=headers).json()["outcome"] == "dissolved"
    _run(runtime, rid)
    assert _output(api, tenant, output)[1] == (2, "matched", "reference, small differences", 2, 2)
    assert api.post(f"{url}/2/confirm", headers=headers).status_code == 409  # not suggested


def test_a_confirmed_suggestion_becomes_manual(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    loose = {"name": "loose", "type": "one_to_one", "keys": [], "date_window": [-1, 1]}
    answer = created(api, tenant, definition(pair, passes=[{**loose, "auto_confirm": False}]))
    rid, output, url = answer["id"], answer["resource_id"], f"{BASE}/{answer['id']}/matches"
    _run(runtime, rid)
    assert _output(api, tenant, output)[0] == (1, "suggested", "loose", 1, 1)
    confirmed = api.post(f"{url}/1/confirm", headers=tenant.v2_headers)
    assert confirmed.json() == {"match_id": 1}
    _run(runtime, rid)
    assert _output(api, tenant, output)[0] == (1, "manual", "manual", 1, 1)
    assert [a["kind"] for a in _actions(api, tenant, rid)] == ["confirm"]
