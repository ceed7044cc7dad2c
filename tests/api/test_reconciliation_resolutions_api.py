"""One-sided resolutions over real HTTP, on both backends (issue #34, point 6): rows of
one side with no counterpart closed with a reason code, `resolved` in the output at once
and counted apart in last_run (equal to the Data API's counts), kept by every run,
reversible, listed with the actions; and their errors in /api/v2's shape."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from support.factories import Tenant, append, make_source
from support.reconciliation_cases import split
from support.reconciliations import Pair, definition, make_pair
from support.v2_api import NOT_FOUND, problems
from tally.core.ids import hash_secret
from tally.runtime import Runtime
from tally.services.admin import key_fingerprint
from tally.storage.schema import derived_resources

BASE = "/api/v2/reconciliations"


@pytest.fixture
def pair(runtime: Runtime, tenant: Tenant) -> Pair:
    return make_pair(runtime.engine, tenant)


def _created(api: httpx.Client, tenant: Tenant, body: dict[str, Any]) -> dict[str, Any]:
    answer = api.post(BASE, json=body, headers=tenant.v2_headers)
    assert answer.status_code == 201, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _run(runtime: Runtime, rid: int) -> None:
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")


def _rows(api: httpx.Client, tenant: Tenant, output: int, **params: str) -> list[dict[str, Any]]:
    response = api.get(f"/api/v1/resources/{output}/data", headers=tenant.headers, params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


def _shown(api: httpx.Client, tenant: Tenant, rid: int) -> dict[str, Any]:
    found: dict[str, Any] = api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()
    return found


def _agree(api: httpx.Client, tenant: Tenant, rid: int, output: int) -> dict[str, int]:
    """last_run's counts equal those the Data API gives per status (matches by their
    match id, unmatched and resolved rows per side); the counts."""
    counts: dict[str, int] = _shown(api, tenant, rid)["last_run"]["counts"]
    rows = _rows(api, tenant, output)
    per_status = Counter(
        r["status"] for r in {r["match_id"]: r for r in rows if r["match_id"]}.values()
    )
    for status in ("matched", "matched_with_difference", "suggested", "manual"):
        assert counts[status] == per_status[status], status
    for status in ("unmatched", "resolved"):
        for side, column in (("left", "bank._row"), ("right", "ledger._row")):
            alone = [r for r in rows if r["status"] == status and r[column] is not None]
            assert counts[f"{status}_{side}"] == len(alone), (status, side)
    return counts


def _unmatched_pair(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> dict[str, Any]:
    """The pair with one exact pass: bank row 2 (-5.50, two days before the ledger's)
    and bank row 3 stay unmatched, as do ledger rows 2, 3, 4."""
    exact = {
        "name": "exact",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference"}],
    }
    answer = _created(api, tenant, definition(pair, passes=[exact]))
    _run(runtime, answer["id"])
    return answer


def test_a_resolution_closes_rows_at_once_and_every_run_keeps_them(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = _unmatched_pair(api, runtime, tenant, pair)
    rid, output = answer["id"], answer["resource_id"]
    before = _agree(api, tenant, rid, output)
    assert (before["unmatched_left"], before["resolved_left"]) == (2, 0)
    body = {"side": "left", "rows": [2], "reason": "bank_fee", "note": "January's fee"}
    made = api.post(f"{BASE}/{rid}/resolutions", json=body, headers=tenant.v2_headers)
    assert made.status_code == 201, made.text
    resolution = made.json()
    actor = f"api key {key_fingerprint(hash_secret(tenant.key))}"
    assert resolution == {
        "id": resolution["id"],
        "side": "left",
        "rows": [2],
        "reason": "bank_fee",
        "note": "January's fee",
        "actor": actor,
        "created_at": resolution["created_at"],
        "undone_at": None,
        "undo_note": None,
        "undo_actor": None,
    }
    # at once, before any run: the row left the exceptions, the figures moved
    [row] = _rows(api, tenant, output, **{"bank._row": "2"})
    assert (row["status"], row["reason"]) == (
        "resolved",
        "resolved: bank_fee, by an analyst (January's fee)",
    )
    assert [
        r["bank._row"] for r in _rows(api, tenant, output, status="unmatched") if r["bank._row"]
    ] == [3]
    now = _agree(api, tenant, rid, output)
    assert (now["unmatched_left"], now["resolved_left"]) == (1, 1)
    amounts = _shown(api, tenant, rid)["last_run"]["amounts"]["left"]
    assert amounts == {
        "matched": "100.00",
        "unmatched": "20.25",
        "resolved": "-5.50",
        "matched_by_status": split(matched="100.00"),
    }
    [action] = api.get(f"{BASE}/{rid}/actions", headers=tenant.v2_headers).json()["data"]
    assert (action["kind"], action["match_id"], action["left_rows"], action["right_rows"]) == (
        "resolve",
        None,
        [2],
        [],
    )
    assert (action["reason"], action["actor"]) == ("bank_fee", actor)
    # a full run keeps it; so does a run after a late file (incremental)
    _run(runtime, rid)
    assert _shown(api, tenant, rid)["last_run"]["amounts"]["left"] == amounts
    assert _agree(api, tenant, rid, output) == now
    append(
        runtime,
        pair.bank,
        "reference,amount,txn_date,memo\nREF-9,1.00,2024-01-09,x\n",
    )
    _run(runtime, rid)
    [row] = _rows(api, tenant, output, **{"bank._row": "2"})
    assert row["status"] == "resolved"
    later = _agree(api, tenant, rid, output)
    assert (later["unmatched_left"], later["resolved_left"]) == (2, 1)


def test_an_incremental_run_keeps_a_resolution_and_its_figures(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """Twenty rows a side reconciled, then a late bank row sharing the resolved row's
    reference: the run is incremental, the resolved row stays resolved, the late row
    is explained by it."""
    header = "reference,amount,txn_date,memo\n"
    rows = "".join(f"R-{n},{n}.00,2024-02-01,x\n" for n in range(1, 21))
    bank = make_source(runtime.engine, tenant, header + rows + "FEE,-3.00,2024-02-02,fee\n")
    ledger = make_source(runtime.engine, tenant, header + rows + "FEE,3.00,2024-02-02,x\n")
    exact = {
        "name": "exact",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference"}],
    }
    body = definition(Pair(bank.id, ledger.id), passes=[exact])
    answer = _created(api, tenant, body)
    rid, output = answer["id"], answer["resource_id"]
    _run(runtime, rid)
    url = f"{BASE}/{rid}/resolutions"
    made = api.post(
        url, json={"side": "left", "rows": [21], "reason": "bank_fee"}, headers=tenant.v2_headers
    )
    assert made.status_code == 201, made.text
    _run(runtime, rid)
    figures = _shown(api, tenant, rid)["last_run"]
    append(runtime, bank.id, header + "FEE,3.00,2024-02-02,late\n")
    _run(runtime, rid)
    shown = _shown(api, tenant, rid)["last_run"]
    assert shown["mode"] == "incremental"
    counts = _agree(api, tenant, rid, output)
    assert (counts["matched"], counts["resolved_left"], counts["unmatched_left"]) == (21, 1, 0)
    assert shown["amounts"]["left"] == {
        "matched": "213.00",
        "unmatched": "0.00",
        "resolved": "-3.00",
        "matched_by_status": split(matched="213.00"),
    }
    assert figures["amounts"]["left"]["resolved"] == "-3.00"
    [fee] = _rows(api, tenant, output, **{"bank._row": "21"})
    assert fee["status"] == "resolved"
    _run_full_again(runtime, rid)
    assert _shown(api, tenant, rid)["last_run"]["counts"] == counts


def test_undoing_a_resolution_reopens_its_rows_and_is_kept(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = _unmatched_pair(api, runtime, tenant, pair)
    rid, output = answer["id"], answer["resource_id"]
    url = f"{BASE}/{rid}/resolutions"
    body = {"side": "right", "rows": [3, 4], "reason": "timing"}
    made = api.post(url, json=body, headers=tenant.v2_headers).json()
    assert _agree(api, tenant, rid, output)["resolved_right"] == 2
    undone = api.request(
        "DELETE",
        f"{url}/{made['id']}",
        json={"note": "booked after all"},
        headers=tenant.v2_headers,
    )
    assert undone.status_code == 200, undone.text
    assert undone.json()["undone_at"] is not None
    assert undone.json()["undo_note"] == "booked after all"
    assert {r["status"] for r in _rows(api, tenant, output, **{"ledger._row__in": "3,4"})} == {
        "unmatched"
    }
    counts = _agree(api, tenant, rid, output)
    assert (counts["unmatched_right"], counts["resolved_right"]) == (3, 0)
    assert api.delete(f"{url}/{made['id']}", headers=tenant.v2_headers).json() == NOT_FOUND
    assert api.delete(f"{url}/999", headers=tenant.v2_headers).json() == NOT_FOUND
    assert api.delete(f"{url}/{2**63}", headers=tenant.v2_headers).status_code == 404
    _run(runtime, rid)
    assert _agree(api, tenant, rid, output)["unmatched_right"] == 3
    kinds = [
        (a["kind"], a["undone_at"] is None)
        for a in api.get(f"{BASE}/{rid}/actions", headers=tenant.v2_headers).json()["data"]
    ]
    assert kinds == [("resolve", False)]
    assert api.post(url, json=body, headers=tenant.v2_headers).status_code == 201  # again


def test_resolution_errors_name_the_field_or_the_row(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    answer = _unmatched_pair(api, runtime, tenant, pair)
    rid = answer["id"]
    url, headers = f"{BASE}/{rid}/resolutions", tenant.v2_headers
    unknown = {"side": "left", "rows": [2], "reason": "lost"}
    assert problems(api.post(url, json=unknown, headers=headers), 422) == [
        ("reason", "unknown reason 'lost': one of bank_fee, timing, duplicate, write_off")
    ]
    missing = {"side": "right", "rows": [9, 2], "reason": "timing"}
    assert problems(api.post(url, json=missing, headers=headers), 400) == [
        ("rows[0]", "right row 9 does not exist: ledger has 4 rows")
    ]
    matched = {"side": "left", "rows": [3, 1], "reason": "timing"}
    assert problems(api.post(url, json=matched, headers=headers), 409) == [
        (
            "rows[1]",
            "left row 1 is in match 1 (matched): only an unmatched row can be resolved; "
            "undo the match first",
        )
    ]
    first = api.post(
        url, json={"side": "left", "rows": [2], "reason": "duplicate"}, headers=headers
    )
    assert first.status_code == 201
    again = api.post(
        url, json={"side": "left", "rows": [3, 2], "reason": "timing"}, headers=headers
    )
    assert problems(again, 409) == [
        ("rows[1]", f"left row 2 is already resolved (duplicate, resolution {first.json()['id']})")
    ]
    match = {"left_rows": [2], "right_rows": [2]}
    assert problems(api.post(f"{BASE}/{rid}/matches", json=match, headers=headers), 409) == [
        (
            "left_rows[0]",
            f"left row 2 is already resolved (duplicate, resolution {first.json()['id']})",
        )
    ]
    for body, field in (
        ({"side": "top", "rows": [1], "reason": "timing"}, "side"),
        ({"side": "left", "rows": [], "reason": "timing"}, "rows"),
        ({"side": "left", "rows": [1, 1], "reason": "timing"}, "rows"),
        ({"side": "left", "rows": [1]}, "reason"),
        ({"side": "left", "rows": [1], "reason": "timing", "colour": "red"}, "colour"),
    ):
        assert [f for f, _ in problems(api.post(url, json=body, headers=headers), 422)] == [field]


def test_a_definition_may_list_its_own_reasons(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    body = definition(pair, resolution_reasons=["fx_rounding", "bank_fee"])
    answer = _created(api, tenant, body)
    shown = _shown(api, tenant, answer["id"])
    assert shown["definition"]["resolution_reasons"] == ["fx_rounding", "bank_fee"]
    plain = _created(api, tenant, definition(pair, name="Plain"))
    assert _shown(api, tenant, plain["id"])["definition"]["resolution_reasons"] == [
        "bank_fee",
        "timing",
        "duplicate",
        "write_off",
    ]
    url = f"{BASE}/{answer['id']}/resolutions"
    refused = api.post(
        url, json={"side": "left", "rows": [1], "reason": "timing"}, headers=tenant.v2_headers
    )
    assert problems(refused, 422) == [
        ("reason", "unknown reason 'timing': one of fx_rounding, bank_fee")
    ]
    bad = definition(pair, name="Bad", resolution_reasons=["ok", "not ok", "ok"])
    assert problems(api.post(BASE, json=bad, headers=tenant.v2_headers), 400) == [
        (
            "resolution_reasons[1]",
            "'not ok' is not a reason code: 1 to 40 letters, digits, '_' or '-'",
        ),
        ("resolution_reasons[2]", "'ok' is listed twice"),
    ]


def _run_full_again(runtime: Runtime, rid: int) -> None:
    """A full run of the same inputs (the definition replaced by itself): its figures
    are the incremental run's."""
    with runtime.engine.begin() as conn:
        conn.execute(
            sa.update(derived_resources).where(derived_resources.c.id == rid).values(run_basis=None)
        )
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")


def test_a_resolution_moves_absolute_amounts_and_the_oldest_date_in_every_kind_of_run(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """The oldest bank row (FEE, -3.00, Jan 20) resolved: at once its amount moves to
    `resolved` (signed -3.00, absolute 3.00) and the oldest unmatched is LATE (Feb 3);
    the full run it queues agrees; a late FEE row (-1.00, Jan 10) re-examines the
    resolved row in an incremental run, which agrees with a full run; undone, the row is
    unmatched again with its date, at once and after a run."""
    header = "reference,amount,txn_date,memo\n"
    rows = "".join(f"R-{n},{n}.00,2024-02-01,x\n" for n in range(1, 21))
    extra = "FEE,-3.00,2024-01-20,fee\nLATE,4.00,2024-02-03,x\n"
    bank = make_source(runtime.engine, tenant, header + rows + extra)
    ledger = make_source(runtime.engine, tenant, header + rows)
    exact = {
        "name": "exact",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference"}],
    }
    answer = _created(api, tenant, definition(Pair(bank.id, ledger.id), passes=[exact]))
    rid, output = answer["id"], answer["resource_id"]
    _run(runtime, rid)
    before = _shown(api, tenant, rid)["last_run"]
    assert before["oldest_unmatched"]["left"] == {"date": "2024-01-20", "rows": 1}
    assert before["absolute_amounts"]["left"]["unmatched"] == "7.00"
    url = f"{BASE}/{rid}/resolutions"
    body = {"side": "left", "rows": [21], "reason": "bank_fee"}
    made = api.post(url, json=body, headers=tenant.v2_headers)
    assert made.status_code == 201, made.text

    def figures() -> dict[str, Any]:
        _agree(api, tenant, rid, output)
        last: dict[str, Any] = _shown(api, tenant, rid)["last_run"]
        return {k: last[k] for k in ("counts", "amounts", "absolute_amounts", "oldest_unmatched")}

    at_once = figures()
    assert at_once["amounts"]["left"] == {
        "matched": "210.00",
        "unmatched": "4.00",
        "resolved": "-3.00",
        "matched_by_status": split(matched="210.00"),
    }
    assert at_once["absolute_amounts"]["left"] == {
        "matched": "210.00",
        "unmatched": "4.00",
        "resolved": "3.00",
        "matched_by_status": split(matched="210.00"),
    }
    assert at_once["oldest_unmatched"] == {
        "left": {"date": "2024-02-03", "rows": 1},
        "right": None,
    }
    _run(runtime, rid)
    assert figures() == at_once
    append(runtime, bank.id, header + "FEE,-1.00,2024-01-10,late\n")
    _run(runtime, rid)
    assert _shown(api, tenant, rid)["last_run"]["mode"] == "incremental"
    incremental = figures()
    assert incremental["absolute_amounts"]["left"] == {
        "matched": "210.00",
        "unmatched": "5.00",
        "resolved": "3.00",
        "matched_by_status": split(matched="210.00"),
    }
    assert incremental["amounts"]["left"]["unmatched"] == "3.00"
    assert incremental["oldest_unmatched"]["left"] == {"date": "2024-01-10", "rows": 1}
    _run_full_again(runtime, rid)
    assert figures() == incremental
    undone = api.request("DELETE", f"{url}/{made.json()['id']}", json={}, headers=tenant.v2_headers)
    assert undone.status_code == 200, undone.text
    reopened = figures()
    assert reopened["absolute_amounts"]["left"] == {
        "matched": "210.00",
        "unmatched": "8.00",
        "resolved": "0.00",
        "matched_by_status": split(matched="210.00"),
    }
    assert reopened["amounts"]["left"]["unmatched"] == "0.00"
    assert reopened["oldest_unmatched"]["left"] == {"date": "2024-01-10", "rows": 1}
    _run(runtime, rid)
    assert figures() == reopened


def test_a_manual_match_of_the_oldest_rows_moves_their_dates_and_amounts_at_once(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    """Bank row 2 (-5.50, Jan 6, the bank's oldest unmatched) matched by hand with
    ledger row 2 (-5.50, Jan 8): at once the bank's oldest is Jan 7, the ledger's stays
    Jan 7 (two rows), both rows' amounts are matched, signed and absolute; the run the
    match queued gives the same figures."""
    answer = _unmatched_pair(api, runtime, tenant, pair)
    rid, output = answer["id"], answer["resource_id"]
    body = {"left_rows": [2], "right_rows": [2]}
    made = api.post(f"{BASE}/{rid}/matches", json=body, headers=tenant.v2_headers)
    assert made.status_code == 201, made.text
    _agree(api, tenant, rid, output)
    keys = ("counts", "amounts", "absolute_amounts", "oldest_unmatched")
    at_once = {k: _shown(api, tenant, rid)["last_run"][k] for k in keys}
    assert at_once["oldest_unmatched"] == {
        "left": {"date": "2024-01-07", "rows": 1},
        "right": {"date": "2024-01-07", "rows": 2},
    }
    assert at_once["absolute_amounts"]["left"] == {
        "matched": "105.50",
        "unmatched": "20.25",
        "resolved": "0.00",
        "matched_by_status": split(matched="100.00", manual="5.50"),
    }
    assert at_once["amounts"]["right"]["matched"] == "94.50"
    _run(runtime, rid)
    _agree(api, tenant, rid, output)
    assert {k: _shown(api, tenant, rid)["last_run"][k] for k in keys} == at_once
