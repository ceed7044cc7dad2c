"""GET /api/v2/reconciliations/{id}/rows/{side}/{row}/candidates over real HTTP, on both
backends (issue #34, point 4): a row's nearest rows of the other side under each pass,
each condition met or failed and by how much, exact."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from support.factories import Tenant, make_source
from support.reconciliations import Pair, definition
from support.v2_api import NOT_FOUND, problems
from tally.runtime import Runtime

BASE = "/api/v2/reconciliations"
BANK = (
    "reference,amount,txn_date\n"
    "INV-1,100.00,2024-03-01\n"  # ledger row 1: exact (matched)
    "INV-2,50.07,2024-03-01\n"  # ledger row 2: amount 0.07 apart, tolerance 0.05
    "INV-3,30.00,2024-03-01\n"  # ledger row 3: 4 days later, window -3..3
    "INV-4,40.00,2024-03-01\n"  # ledger row 4: reference INV-44
)
LEDGER = (
    "reference,amount,txn_date\n"
    " inv-1 ,100.00,2024-03-01\n"
    "INV-2,50.00,2024-03-01\n"
    "INV-3,30.00,2024-03-05\n"
    "INV-44,40.00,2024-03-01\n"
)
NEAR = {
    "name": "near",
    "type": "one_to_one",
    "keys": [{"left": "reference", "right": "reference", "normalize": ["trim", "casefold"]}],
    "amount_tolerance": "0.05",
    "date_window": [-3, 3],
}


@pytest.fixture
def reconciled(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> dict[str, Any]:
    bank = make_source(runtime.engine, tenant, BANK, name="bank")
    ledger = make_source(runtime.engine, tenant, LEDGER, name="ledger")
    body = definition(Pair(bank.id, ledger.id), passes=[NEAR])
    answer: dict[str, Any] = api.post(BASE, json=body, headers=tenant.v2_headers).json()
    runtime.derived.run_now(answer["id"], kind="reconciliation", worker="test-worker")
    return answer


def _get(api: httpx.Client, tenant: Tenant, rid: int, side: str, row: int) -> httpx.Response:
    return api.get(f"{BASE}/{rid}/rows/{side}/{row}/candidates", headers=tenant.v2_headers)


def _first(api: httpx.Client, tenant: Tenant, rid: int, side: str, row: int) -> dict[str, Any]:
    response = _get(api, tenant, rid, side, row)
    assert response.status_code == 200, response.text
    [near] = response.json()["passes"]
    assert near["name"] == "near"
    found: dict[str, Any] = near["candidates"][0]
    return found


def _conditions(candidate: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    return {c["condition"]: (c["met"], c["detail"]) for c in candidate["conditions"]}


def test_a_near_miss_on_amount_names_the_gap_and_the_tolerance(
    api: httpx.Client, tenant: Tenant, reconciled: dict[str, Any]
) -> None:
    response = _get(api, tenant, reconciled["id"], "left", 2)
    answer = response.json()
    assert (answer["side"], answer["row"], answer["status"], answer["match_id"]) == (
        "left",
        2,
        "unmatched",
        None,
    )
    best = answer["passes"][0]["candidates"][0]
    assert (best["row"], best["status"], best["fits"]) == (2, "unmatched", False)
    [amount] = [c for c in best["conditions"] if c["condition"] == "amount"]
    assert amount == {
        "condition": "amount",
        "met": False,
        "detail": "differs by 0.07, tolerance 0.05",
        "difference": "0.07",
        "tolerance": "0.05",
        "days": None,
        "window": None,
    }
    assert _conditions(best)["keys"] == (
        True,
        "reference 'INV-2' and reference 'INV-2' equal after trim, casefold",
    )
    assert _conditions(best)["date"] == (True, "ledger date the same day, window -3..3")
    assert len(answer["passes"][0]["candidates"]) == 4  # every ledger row, nearest first


def test_a_near_miss_on_the_date_names_the_days_and_the_window(
    api: httpx.Client, tenant: Tenant, reconciled: dict[str, Any]
) -> None:
    best = _first(api, tenant, reconciled["id"], "left", 3)
    assert best["row"] == 3
    [date] = [c for c in best["conditions"] if c["condition"] == "date"]
    assert (date["met"], date["days"], date["window"], date["detail"]) == (
        False,
        4,
        [-3, 3],
        "ledger date 4 days later, window -3..3",
    )
    assert _conditions(best)["amount"] == (True, "equal")


def test_a_near_miss_on_the_keys_is_found_by_amount(
    api: httpx.Client, tenant: Tenant, reconciled: dict[str, Any]
) -> None:
    best = _first(api, tenant, reconciled["id"], "right", 4)
    assert best["row"] == 4
    assert _conditions(best)["keys"] == (
        False,
        "reference 'INV-4' and reference 'INV-44' differ after trim, casefold",
    )
    assert {name for name, (met, _) in _conditions(best).items() if not met} == {"keys"}


def test_a_matched_row_shows_its_match_and_its_exact_partner(
    api: httpx.Client, tenant: Tenant, reconciled: dict[str, Any]
) -> None:
    response = _get(api, tenant, reconciled["id"], "left", 1)
    assert (response.json()["status"], response.json()["match_id"]) == ("matched", 1)
    best = response.json()["passes"][0]["candidates"][0]
    assert (best["row"], best["status"], best["fits"]) == (1, "matched", True)
    assert _conditions(best)["free"] == (True, "in this row's own match 1")
    others = response.json()["passes"][0]["candidates"][1:]
    assert all(not c["fits"] for c in others)


def test_candidates_errors(api: httpx.Client, tenant: Tenant, reconciled: dict[str, Any]) -> None:
    rid = reconciled["id"]
    assert problems(_get(api, tenant, rid, "left", 9), 400) == [
        ("row", "left row 9 does not exist: bank has 4 rows")
    ]
    assert _get(api, tenant, rid, "top", 1).status_code == 422
    assert _get(api, tenant, 999_999, "left", 1).json() == NOT_FOUND


def test_a_rejected_pair_is_named_so_and_a_resolution_rejects_nothing(
    api: httpx.Client, tenant: Tenant, reconciled: dict[str, Any]
) -> None:
    """Only the rejections in force fail `not_rejected`: the other manual work (here a
    resolution of a row) is not read as one."""
    rid = reconciled["id"]
    rejected = api.delete(f"{BASE}/{rid}/matches/1", headers=tenant.v2_headers)
    assert rejected.json() == {"match_id": 1, "outcome": "rejected"}
    resolved = api.post(
        f"{BASE}/{rid}/resolutions",
        json={"side": "left", "rows": [4], "reason": "timing"},
        headers=tenant.v2_headers,
    )
    assert resolved.status_code == 201, resolved.text
    answer = _get(api, tenant, rid, "left", 1).json()
    by_row = {c["row"]: _conditions(c)["not_rejected"] for c in answer["passes"][0]["candidates"]}
    assert by_row[1] == (False, "an analyst rejected this pair")
    assert by_row[4] == (True, "not rejected")
    answer = _get(api, tenant, rid, "right", 4).json()
    by_row = {c["row"]: _conditions(c)["not_rejected"] for c in answer["passes"][0]["candidates"]}
    assert by_row[4] == (True, "not rejected")  # left row 4 resolved, not rejected
