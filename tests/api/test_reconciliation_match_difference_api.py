"""A manual match whose rows do not balance (issue #34, point 3), over real HTTP on both
backends: recorded only with a note (422 naming `note` without one), its difference kept
on the match and shown in the output with a reason saying so; a balanced one needs none."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from support.factories import Tenant
from support.reconciliation_cases import split
from support.reconciliations import Pair, definition, make_pair
from support.v2_api import problems
from tally.runtime import Runtime

BASE = "/api/v2/reconciliations"
EXACT = {
    "name": "exact",
    "type": "one_to_one",
    "keys": [{"left": "reference", "right": "reference"}],
}


@pytest.fixture
def pair(runtime: Runtime, tenant: Tenant) -> Pair:
    return make_pair(runtime.engine, tenant)


def _rows(api: httpx.Client, tenant: Tenant, output: int) -> list[dict[str, Any]]:
    response = api.get(
        f"/api/v1/resources/{output}/data",
        headers=tenant.headers,
        params={
            "status": "manual",
            "fields": "match_id,status,pass,difference,reason,bank._row,ledger._row",
        },
    )
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


def test_a_match_with_a_difference_needs_a_note_and_keeps_the_difference(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = api.post(BASE, json=definition(pair, passes=[EXACT]), headers=tenant.v2_headers).json()
    rid, output = answer["id"], answer["resource_id"]
    url = f"{BASE}/{rid}/matches"
    # bank row 3 is 20.25, ledger row 3 is 20.00: 0.25 apart
    unbalanced = {"left_rows": [3], "right_rows": [3]}
    assert problems(api.post(url, json=unbalanced, headers=tenant.v2_headers), 422) == [
        (
            "note",
            "the rows differ by 0.25 (left minus right): a match with a difference needs a "
            "note saying why",
        )
    ]
    blank = {**unbalanced, "note": ""}
    assert problems(api.post(url, json=blank, headers=tenant.v2_headers), 422)[0][0] == "note"
    actions = api.get(f"{BASE}/{rid}/actions", headers=tenant.v2_headers).json()["data"]
    assert actions == []
    noted = {**unbalanced, "note": "bank charged 0.25 on the refund"}
    made = api.post(url, json=noted, headers=tenant.v2_headers)
    assert (made.status_code, made.json()) == (201, {"match_id": 3})
    # a balanced match needs no note: bank row 2 and ledger row 2 are both -5.50
    balanced = api.post(url, json={"left_rows": [2], "right_rows": [2]}, headers=tenant.v2_headers)
    assert balanced.status_code == 201, balanced.text
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")
    assert _rows(api, tenant, output) == [
        {
            "match_id": 2,
            "status": "manual",
            "pass": "manual",
            "difference": 0.0,
            "reason": "manual: matched by an analyst",
            "bank._row": 2,
            "ledger._row": 2,
        },
        {
            "match_id": 3,
            "status": "manual",
            "pass": "manual",
            "difference": 0.25,
            "reason": "manual: matched by an analyst, amount differs by 0.25 "
            "(bank charged 0.25 on the refund)",
            "bank._row": 3,
            "ledger._row": 3,
        },
    ]
    counts = api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()["last_run"]["counts"]
    assert counts["manual"] == 2


def test_the_rows_are_checked_before_the_balance(
    api: httpx.Client, tenant: Tenant, pair: Pair
) -> None:
    """A row not in its input is the 400, a row taken the 409, whatever the balance."""
    rid = api.post(BASE, json=definition(pair), headers=tenant.v2_headers).json()["id"]
    url = f"{BASE}/{rid}/matches"
    missing = {"left_rows": [9], "right_rows": [3]}
    assert (
        problems(api.post(url, json=missing, headers=tenant.v2_headers), 400)[0][0]
        == "left_rows[0]"
    )
    first = api.post(url, json={"left_rows": [1], "right_rows": [1]}, headers=tenant.v2_headers)
    assert first.status_code == 201
    taken = {"left_rows": [1], "right_rows": [3]}
    assert (
        problems(api.post(url, json=taken, headers=tenant.v2_headers), 409)[0][0] == "left_rows[0]"
    )


def test_a_manual_match_of_unmatched_rows_leaves_the_exceptions_at_once(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    """Before any run: the rows show `manual` (status=unmatched no longer lists them)
    and last_run counts the match, as the Data API does; the run then pairs them."""
    body = definition(pair, passes=[EXACT])
    answer = api.post(BASE, json=body, headers=tenant.v2_headers).json()
    rid, output = answer["id"], answer["resource_id"]
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")
    url = f"{BASE}/{rid}/matches"
    match = {"left_rows": [3], "right_rows": [3, 4], "note": "split refund"}
    assert api.post(url, json=match, headers=tenant.v2_headers).status_code == 201
    data = f"/api/v1/resources/{output}/data"
    open_rows = api.get(data, headers=tenant.headers, params={"status": "unmatched"}).json()
    assert [(r["bank._row"], r["ledger._row"]) for r in open_rows["data"]] == [
        (2, None),
        (None, 2),
    ]
    shown = _rows(api, tenant, output)
    assert [(r["match_id"], r["bank._row"], r["ledger._row"], r["reason"]) for r in shown] == [
        (3, 3, None, "manual: matched by an analyst; the next run pairs the rows (split refund)"),
        (3, None, 3, "manual: matched by an analyst; the next run pairs the rows (split refund)"),
        (3, None, 4, "manual: matched by an analyst; the next run pairs the rows (split refund)"),
    ]
    last_run = api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()["last_run"]
    counts = last_run["counts"]
    assert (counts["manual"], counts["unmatched_left"], counts["unmatched_right"]) == (1, 1, 1)
    assert last_run["amounts"]["left"] == {
        "matched": "120.25",
        "unmatched": "-5.50",
        "resolved": "0.00",
        "matched_by_status": split(matched="100.00", manual="20.25"),
    }
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")
    assert [(r["bank._row"], r["ledger._row"]) for r in _rows(api, tenant, output)] == [
        (3, 3),
        (3, 4),
    ]
    again = api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()["last_run"]
    assert again["counts"] == counts
    assert again["amounts"] == last_run["amounts"]
