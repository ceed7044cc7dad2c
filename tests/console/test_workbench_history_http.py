"""The workbench's History view over HTTP, both backends: every action with its time,
actor, kind, rows, reason and note, newest first, whether taken through the API (a
key's fingerprint) or the console (a user's name), a definition change and a run asked
for among them; an undo an entry of its own beside the action it undid; filters by
actor and kind in the URL; paging; Undo from the history (analysts; a viewer's forged
POST is a 403); the CSV export equal, value by value, to GET .../actions."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.console import SAME_ORIGIN, make_user, sign_in
from support.console_reconciliations import reconciled as reconciled_pair
from support.factories import Tenant, make_tenant
from tally.runtime import Runtime
from tally.services.authentication import api_key_actor
from tally.services.reconciliation.history import HISTORY_PAGE_SIZE


def reconciled(runtime: Runtime, tenant: Tenant) -> int:
    """A reconciliation run once (unmatched rows on both sides: bank rows 3 and 4,
    ledger rows 4 and 5); its id."""
    return reconciled_pair(runtime, tenant)[0]


@pytest.fixture
def people(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> Iterator[dict[str, httpx.Client]]:
    """A client signed in to the console per role (named `ada`, `alice`, `vic` + id)."""
    clients = {}
    for role in ("admin", "analyst", "viewer"):
        client = httpx.Client(base_url=api.base_url, timeout=30, follow_redirects=False)
        user = make_user(runtime, tenant.workspace_id, role)
        assert sign_in(client, user.name).status_code == 303
        clients[role] = client
    yield clients
    for client in clients.values():
        client.close()


def api_actions(api: httpx.Client, tenant: Tenant, reconciliation_id: int) -> list[dict[str, Any]]:
    found = api.get(
        f"/api/v2/reconciliations/{reconciliation_id}/actions", headers=tenant.v2_headers
    )
    assert found.status_code == 200, found.text
    return list(found.json()["data"])


def history(client: httpx.Client, reconciliation_id: int, **state: str) -> str:
    page = client.get(f"/console/reconciliations/{reconciliation_id}/history", params=state)
    assert page.status_code == 200, page.text
    return page.text


def entries(html: str) -> list[tuple[str, str]]:
    """The table's entries in order: (row id, actor cell text)."""
    return [
        (m.group(1), re.sub(r"<[^>]+>", "", m.group(2)).strip())
        for m in re.finditer(
            r'<tr id="entry-([a-z]+-\d+)">\s*<td>.*?</td>\s*<th scope="row">.*?</th>\s*'
            r"<td>(.*?)</td>",
            html,
            re.S,
        )
    ]


def worked(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> int:
    """Actions through the API (a key) and the console (users): a resolution, a manual
    match with a difference, a definition replaced, a run asked for, an undo."""
    rid = reconciled(runtime, tenant)
    base = f"/api/v2/reconciliations/{rid}"
    made = api.post(
        f"{base}/resolutions",
        json={"side": "left", "rows": [3], "reason": "write_off", "note": "<b>old</b> refund"},
        headers=tenant.v2_headers,
    )
    assert made.status_code == 201, made.text
    matched = api.post(
        f"{base}/matches",
        json={"left_rows": [4], "right_rows": [5], "note": "part paid"},
        headers=tenant.v2_headers,
    )
    assert matched.status_code == 201, matched.text
    shown = api.get(base, headers=tenant.v2_headers).json()["definition"]
    replaced = api.put(
        base, json={**shown, "name": "Bank vs ledger, Jan"}, headers=tenant.v2_headers
    )
    assert replaced.status_code == 200, replaced.text
    asked = people["admin"].post(f"/console/reconciliations/{rid}/run", headers=SAME_ORIGIN)
    assert asked.status_code == 303, asked.text
    undone = people["analyst"].post(
        f"/console/reconciliations/{rid}/history/undo",
        data={"action_id": str(made.json()["id"]), "note": "booked in February"},
        headers=SAME_ORIGIN,
    )
    assert undone.status_code == 303, undone.text
    assert (
        undone.headers["location"]
        == f"/console/reconciliations/{rid}/history?undone={made.json()['id']}"
    )
    return rid


def test_every_action_newest_first_with_its_actor_and_an_undo_of_its_own(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> None:
    rid = worked(api, runtime, tenant, people)
    key = api_key_actor(tenant.key)
    taken = api_actions(api, tenant, rid)
    assert [(a["kind"], a["actor"]) for a in taken] == [
        ("resolve", key),
        ("match", key),
        ("define", key),
        ("run", people_name(people, "admin")),
    ]
    resolution = taken[0]
    assert resolution["undo_actor"] == people_name(people, "analyst")
    assert resolution["undo_note"] == "booked in February"
    assert taken[2]["left_rows"] == taken[2]["right_rows"] == []
    assert taken[2]["match_id"] is None
    html = history(people["viewer"], rid)
    ids = [a["id"] for a in taken]
    assert entries(html) == [
        (f"undo-{ids[0]}", people_name(people, "analyst")),
        (f"run-{ids[3]}", people_name(people, "admin")),
        (f"define-{ids[2]}", key),
        (f"match-{ids[1]}", key),
        (f"resolve-{ids[0]}", key),
    ]
    assert "&lt;b&gt;old&lt;/b&gt; refund" in html
    assert "<b>old" not in html
    assert "bank row 4; ledger row 5" in html
    assert "write_off" in html
    assert "Undo<span" not in html  # a viewer is offered no Undo
    assert "Export CSV" in html
    assert "5 entries" in html


def people_name(people: dict[str, httpx.Client], role: str) -> str:
    page = people[role].get("/console/overview").text
    found = re.search(r'<div class="who">\s*<span>([^ ]+) \(', page)
    assert found is not None
    return found.group(1)


def test_filters_by_actor_and_kind_live_in_the_url(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> None:
    rid = worked(api, runtime, tenant, people)
    key = api_key_actor(tenant.key)
    by_key = entries(history(people["viewer"], rid, actor=key))
    assert [e[0].split("-")[0] for e in by_key] == ["define", "match", "resolve"]
    assert [e[0].split("-")[0] for e in entries(history(people["viewer"], rid, kind="undo"))] == [
        "undo"
    ]
    both = history(people["viewer"], rid, actor=key, kind="define")
    assert [e[0].split("-")[0] for e in entries(both)] == ["define"]
    assert '<option value="define" selected>' in both
    assert f'<option value="{key}" selected>' in both
    refused = people["viewer"].get(
        f"/console/reconciliations/{rid}/history", params={"kind": "drop"}
    )
    assert refused.status_code == 400
    assert 'role="alert"' in refused.text


def test_undo_from_history_is_for_analysts_and_only_where_the_api_allows_it(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> None:
    rid = worked(api, runtime, tenant, people)
    taken = api_actions(api, tenant, rid)
    match, define = taken[1], taken[2]
    url = f"/console/reconciliations/{rid}/history/undo"
    forged = people["viewer"].post(url, data={"action_id": str(match["id"])}, headers=SAME_ORIGIN)
    assert forged.status_code == 403
    page = history(people["analyst"], rid, kind="match")
    assert f'<label for="note-{match["id"]}">' in page
    refused = people["analyst"].post(
        url, data={"action_id": str(define["id"]), "kind": "define"}, headers=SAME_ORIGIN
    )
    assert refused.status_code == 409
    assert re.search(
        r'<p class="error" role="alert" id="refused-\d+">action \d+ is not', refused.text
    )
    done = people["analyst"].post(
        url,
        data={"action_id": str(match["id"]), "note": "wrong pair", "kind": "match", "page": "1"},
        headers=SAME_ORIGIN,
    )
    assert done.status_code == 303
    assert done.headers["location"].endswith(f"/history?kind=match&undone={match['id']}")
    dissolved = api_actions(api, tenant, rid)[1]
    assert dissolved["undone_at"]
    assert dissolved["undo_note"] == "wrong pair"
    again = people["analyst"].post(url, data={"action_id": str(match["id"])}, headers=SAME_ORIGIN)
    assert again.status_code == 409  # undone already: nothing is undone twice
    huge = people["analyst"].post(url, data={"action_id": str(2**70)}, headers=SAME_ORIGIN)
    assert huge.status_code == 409  # no action has that id; never a database error


def test_the_csv_export_is_every_entry_value_by_value(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> None:
    rid = worked(api, runtime, tenant, people)
    taken = {a["id"]: a for a in api_actions(api, tenant, rid)}
    answer = people["viewer"].get(f"/console/reconciliations/{rid}/history/export.csv")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(answer.text)))
    assert lines[0] == [
        "Time",
        "Kind",
        "Actor",
        "Action",
        "Match",
        "bank rows",
        "ledger rows",
        "Reason",
        "Note",
    ]
    assert len(lines) == 1 + 5
    for time, kind, actor, action, match, left, right, reason, note in lines[1:]:
        shown = taken[int(action)]
        if kind == "undo":
            assert (time, actor, note) == (
                shown["undone_at"],
                shown["undo_actor"],
                shown["undo_note"],
            )
        else:
            assert (time, kind, actor) == (shown["created_at"], shown["kind"], shown["actor"])
            assert note == (shown["note"] or "")
        assert match == ("" if shown["match_id"] is None else str(shown["match_id"]))
        assert left == " ".join(map(str, shown["left_rows"]))
        assert right == " ".join(map(str, shown["right_rows"]))
        assert reason == (shown["reason"] or "")
    key = api_key_actor(tenant.key)
    filtered = people["viewer"].get(
        f"/console/reconciliations/{rid}/history/export.csv", params={"actor": key, "kind": "match"}
    )
    assert [line[1] for line in csv.reader(io.StringIO(filtered.text))][1:] == ["match"]


def test_pages_of_the_history_come_from_the_server(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> None:
    rid = reconciled(runtime, tenant)
    for _ in range(HISTORY_PAGE_SIZE + 2):
        runtime.reconciliations.queue_run(
            workspace_id=tenant.workspace_id, reconciliation_id=rid, actor="robot"
        )
    first = history(people["viewer"], rid, actor="robot")
    assert len(entries(first)) == HISTORY_PAGE_SIZE
    assert "page 1 of 2" in first
    assert 'rel="next"' in first
    second = history(people["viewer"], rid, actor="robot", page="2")
    assert len(entries(second)) == 2
    assert set(entries(first)).isdisjoint(entries(second))


def test_another_workspaces_history_is_the_missing_page(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, people: dict[str, httpx.Client]
) -> None:
    other = make_tenant(runtime.engine)
    rid = reconciled(runtime, other)
    for path in ("history", "history/export.csv"):
        assert people["viewer"].get(f"/console/reconciliations/{rid}/{path}").status_code == 404
    undo = people["analyst"].post(
        f"/console/reconciliations/{rid}/history/undo", data={"action_id": "1"}, headers=SAME_ORIGIN
    )
    assert undo.status_code == 404
