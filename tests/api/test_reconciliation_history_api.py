"""Who changed a reconciliation, in GET .../actions, both backends: a PUT is an action
of kind `define` and a POST .../runs one of kind `run`, each with the key's fingerprint
as its actor and no rows; they are events, never manual work (a run, the retirement of
the manual work by a PUT that moves a side, and an undo all leave them as they are)."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import orjson

from support.factories import Tenant, make_source
from support.reconciliations import definition, make_pair
from tally.runtime import Runtime
from tally.services.authentication import api_key_actor
from tally.storage import reconciliation_actions

BASE = "/api/v2/reconciliations"


def actions(api: httpx.Client, tenant: Tenant, rid: int) -> list[dict[str, Any]]:
    found = api.get(f"{BASE}/{rid}/actions", headers=tenant.v2_headers)
    assert found.status_code == 200, found.text
    return list(found.json()["data"])


def test_a_put_and_a_run_asked_for_are_kept_with_the_keys_fingerprint(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    pair = make_pair(runtime.engine, tenant)
    made = api.post(BASE, json=definition(pair), headers=tenant.v2_headers)
    assert made.status_code == 201, made.text
    rid = made.json()["id"]
    url = f"{BASE}/{rid}"
    match = {"left_rows": [1], "right_rows": [1]}
    assert api.post(f"{url}/matches", json=match, headers=tenant.v2_headers).status_code == 201
    replaced = api.put(url, json=definition(pair, name="Renamed"), headers=tenant.v2_headers)
    assert replaced.status_code == 200, replaced.text
    assert api.post(f"{url}/runs", headers=tenant.v2_headers).status_code == 202
    runtime.derived.run_now(rid, kind="reconciliation", worker="test")
    key = api_key_actor(tenant.key)
    taken = actions(api, tenant, rid)
    assert [(a["kind"], a["actor"]) for a in taken] == [
        ("match", key),
        ("define", key),
        ("run", key),
    ]
    stored = replaced.json()["definition"]
    digest = hashlib.sha256(orjson.dumps(stored, option=orjson.OPT_SORT_KEYS)).hexdigest()
    for event in taken[1:]:
        assert event["left_rows"] == []
        assert event["right_rows"] == []
        assert (event["match_id"], event["note"], event["reason"]) == (None, None, None)
        assert event["fingerprint"] == digest
        assert event["undone_at"] is None
    # never manual work: what a run respects, and what it counted
    with runtime.engine.connect() as conn:
        work = reconciliation_actions.manual_work(conn, rid)
    assert (len(work.matches), len(work.rejections), len(work.resolutions)) == (1, 0, 0)
    last_run = api.get(url, headers=tenant.v2_headers).json()["last_run"]
    assert last_run["manual_work"]["matches"] == 1
    assert last_run["manual_work"]["rejections"] == 0
    # the match undone: the events stay as they were
    undone = api.request("DELETE", f"{url}/matches/1", json={}, headers=tenant.v2_headers)
    assert undone.status_code == 200, undone.text
    assert [a["undone_at"] is None for a in actions(api, tenant, rid)] == [False, True, True]


def test_a_put_that_moves_a_side_retires_the_manual_work_not_the_events(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    pair = make_pair(runtime.engine, tenant)
    rid = api.post(BASE, json=definition(pair), headers=tenant.v2_headers).json()["id"]
    url = f"{BASE}/{rid}"
    assert api.post(f"{url}/runs", headers=tenant.v2_headers).status_code == 202
    match = {"left_rows": [1], "right_rows": [1]}
    assert api.post(f"{url}/matches", json=match, headers=tenant.v2_headers).status_code == 201
    ledger2 = make_source(runtime.engine, tenant, "reference,amount,txn_date\nA,1.00,2024-01-01\n")
    moved = definition(pair)
    moved["right"]["resource_id"] = ledger2.id
    assert api.put(url, json=moved, headers=tenant.v2_headers).status_code == 200
    taken = actions(api, tenant, rid)
    assert [a["kind"] for a in taken] == ["run", "match", "define"]
    assert taken[0]["undone_at"] is None
    assert taken[0]["retired_reason"] is None
    assert taken[1]["retired_reason"] is not None  # the manual work, retired
    assert taken[2]["undone_at"] is None
