"""Two analysts acting on the same rows at once (issue #34, rules), over real HTTP on both
backends: one wins, the other gets a 409 naming the row, and nothing is doubled or lost;
and a file arriving while a match is recorded leaves both the match and its rows.

Each request takes the reconciliation's row lock (SELECT ... FOR UPDATE on PostgreSQL,
SQLite's one writer) before it reads the manual work, so the second sees the first's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from support.factories import Tenant, append
from support.reconciliations import Pair, definition, make_pair
from support.v2_api import problems
from tally.runtime import Runtime
from tally.services.admin import AdminService

BASE = "/api/v2/reconciliations"
EXACT = {
    "name": "exact",
    "type": "one_to_one",
    "keys": [{"left": "reference", "right": "reference"}],
}
ROUNDS = 5  # races per pair of requests: each a fresh reconciliation


@pytest.fixture
def pair(runtime: Runtime, tenant: Tenant) -> Pair:
    return make_pair(runtime.engine, tenant)


def _at_once(
    api: httpx.Client, requests: list[Callable[[httpx.Client], httpx.Response]]
) -> list[httpx.Response]:
    """The requests sent together, each on its own connection, released by one barrier."""
    start = threading.Barrier(len(requests))

    def send(request: Callable[[httpx.Client], httpx.Response]) -> httpx.Response:
        with httpx.Client(base_url=api.base_url, timeout=30) as client:
            start.wait()
            return request(client)

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(send, requests))


def _reconciliation(api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair, n: int) -> int:
    body = definition(pair, name=f"Race {n}", passes=[EXACT])
    rid: int = api.post(BASE, json=body, headers=tenant.v2_headers).json()["id"]
    runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")
    return rid


def _in_force(api: httpx.Client, tenant: Tenant, rid: int) -> list[dict[str, Any]]:
    found = api.get(f"{BASE}/{rid}/actions", headers=tenant.v2_headers).json()["data"]
    return [a for a in found if a["undone_at"] is None]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            ("matches", {"left_rows": [3], "right_rows": [3, 4]}),
            ("matches", {"left_rows": [3], "right_rows": [3, 4]}),
        ),
        (
            ("matches", {"left_rows": [3], "right_rows": [3, 4]}),
            ("resolutions", {"side": "left", "rows": [3], "reason": "timing"}),
        ),
        (
            ("resolutions", {"side": "right", "rows": [3], "reason": "timing"}),
            ("resolutions", {"side": "right", "rows": [3, 4], "reason": "bank_fee"}),
        ),
    ],
    ids=["match-match", "match-resolution", "resolution-resolution"],
)
def test_two_analysts_on_the_same_rows_one_wins_the_other_gets_a_409(
    api: httpx.Client,
    runtime: Runtime,
    tenant: Tenant,
    pair: Pair,
    first: tuple[str, dict[str, Any]],
    second: tuple[str, dict[str, Any]],
) -> None:
    colleague = {
        **tenant.v2_headers,
        "x-api-key": AdminService(runtime.engine).create_api_key(tenant.workspace_id).key,
    }
    for n in range(ROUNDS):
        rid = _reconciliation(api, runtime, tenant, pair, n)
        sent = [
            (
                lambda c, path=path, body=body, headers=headers, rid=rid: c.post(
                    f"{BASE}/{rid}/{path}", json=body, headers=headers
                )
            )
            for (path, body), headers in ((first, tenant.v2_headers), (second, colleague))
        ]
        answers = _at_once(api, sent)
        assert sorted(a.status_code for a in answers) == [201, 409], [a.text for a in answers]
        [lost] = [a for a in answers if a.status_code == 409]
        assert all("is already" in message for _, message in problems(lost, 409))
        assert len(_in_force(api, tenant, rid)) == 1  # the winner's, once
        shown = api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()
        data = api.get(
            f"/api/v1/resources/{shown['resource_id']}/data", headers=tenant.headers
        ).json()
        resolved = [r for r in data["data"] if r["status"] == "resolved"]
        counts = shown["last_run"]["counts"]
        assert counts["resolved_left"] + counts["resolved_right"] == len(resolved)


def test_a_file_arriving_while_a_match_is_recorded_loses_neither(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair
) -> None:
    for n in range(ROUNDS):
        rid = _reconciliation(api, runtime, tenant, pair, n)
        before = api.get(f"/api/v1/resources/{pair.bank}/data", headers=tenant.headers).json()
        _file_during_match(api, runtime, tenant, pair, rid, n)
        runtime.derived.run_now(rid, kind="reconciliation", worker="test-worker")
        shown = api.get(f"{BASE}/{rid}", headers=tenant.v2_headers).json()
        rows = api.get(
            f"/api/v1/resources/{shown['resource_id']}/data", headers=tenant.headers
        ).json()["data"]
        manual = [(r["bank._row"], r["ledger._row"]) for r in rows if r["status"] == "manual"]
        assert manual == [(3, 3), (3, 4)]
        bank_rows = {r["bank._row"] for r in rows if r["bank._row"] is not None}
        assert len(bank_rows) == len(before["data"]) + 1  # every bank row, the late one too
        assert shown["last_run"]["counts"]["manual"] == 1


def _file_during_match(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, pair: Pair, rid: int, n: int
) -> None:
    """A late bank file delivered while bank row 3 and ledger rows 3, 4 are matched."""
    start = threading.Barrier(2)

    def deliver() -> None:
        start.wait()
        late = f"reference,amount,txn_date,memo\nLATE-{n},1.00,2024-02-01,x\n"
        append(runtime, pair.bank, late)

    def match() -> httpx.Response:
        with httpx.Client(base_url=api.base_url, timeout=30) as client:
            start.wait()
            body = {"left_rows": [3], "right_rows": [3, 4], "note": f"round {n}"}
            return client.post(f"{BASE}/{rid}/matches", json=body, headers=tenant.v2_headers)

    with ThreadPoolExecutor(2) as pool:
        delivered = pool.submit(deliver)
        matched = pool.submit(match)
        delivered.result()
        assert matched.result().status_code == 201, matched.result().text
