"""The workbench's Suggestions, Matches and Resolved views over HTTP, both backends: what
they list equals the Data API's rows and GET .../actions; confirm, reject, the selected
at once (a refusal names its match, the others done), undo of a manual and of an
automatic match, reopen; what shows at once and what after the next run; roles (a
viewer's forged POST is 403), another workspace's id, refused URLs and notes."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import httpx

from support.console import SAME_ORIGIN, make_user, sign_in
from support.factories import Tenant, make_source, make_tenant
from support.reconciliations import Pair, definition, make_pair
from support.workbench import reconciled, run
from tally.core.reconciliation import SideName
from tally.runtime import Runtime

MATCHED = ("matched", "matched_with_difference", "manual")


def signed_in(api: httpx.Client, runtime: Runtime, tenant: Tenant, role: str) -> str:
    api.follow_redirects = False
    name = make_user(runtime, tenant.workspace_id, role).name
    assert sign_in(api, name).status_code == 303
    return name


def data_rows(api: httpx.Client, tenant: Tenant, output_id: int, **filters: str) -> list[Any]:
    """The Data API's rows, numbers as their exact text."""
    answer = api.get(
        f"/api/v1/resources/{output_id}/data",
        headers=tenant.headers,
        params={"page_size": "1000", **filters},
    )
    assert answer.status_code == 200, answer.text
    rows: list[Any] = json.loads(answer.text, parse_float=str, parse_int=str)["data"]
    return rows


def actions(api: httpx.Client, tenant: Tenant, reconciliation_id: int) -> list[Any]:
    answer = api.get(
        f"/api/v2/reconciliations/{reconciliation_id}/actions", headers=tenant.v2_headers
    )
    assert answer.status_code == 200
    taken: list[Any] = answer.json()["data"]
    return taken


def counts(api: httpx.Client, tenant: Tenant, reconciliation_id: int) -> Any:
    """last_run's counts, as GET /api/v2/reconciliations/{id} gives them."""
    shown = api.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    return shown.json()["last_run"]["counts"]


def suggested_ids(api: httpx.Client, tenant: Tenant, output_id: int) -> list[int]:
    return sorted(
        {int(r["match_id"]) for r in data_rows(api, tenant, output_id, status="suggested")}
    )


def post(api: httpx.Client, url: str, **form: Any) -> httpx.Response:
    return api.post(url, data=form, headers=SAME_ORIGIN)


def head_of(page: str, match_id: int) -> str:
    """The head cell of a match's group on a page."""
    found = re.search(rf'<tbody id="match-{match_id}">(.*?)</th>', page, re.S)
    assert found is not None, match_id
    return found.group(1)


def test_suggestions_are_the_data_apis_with_reason_and_difference(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    signed_in(api, runtime, tenant, "viewer")
    page = api.get(f"/console/reconciliations/{reconciliation_id}/suggestions")
    assert page.status_code == 200
    rows = data_rows(api, tenant, output_id, status="suggested")
    assert len(rows) == 3
    assert {r["difference"] for r in rows} == {"0.00", "-0.05"}
    for row in rows:
        head = head_of(page.text, int(row["match_id"]))
        assert html.escape(row["reason"], quote=False) in head
        assert f'difference <span class="num">{row["difference"]}</span>' in head
        assert f"pass {row['pass']}" in head
        for value in (row["bank.amount"], row["ledger.amount"], row["bank.reference"]):
            assert f">{value}</td>" in page.text
    assert "matches 1\u20133 of 3" in page.text
    assert counts(api, tenant, reconciliation_id)["suggested"] == 3
    # a viewer sees the same page without its buttons
    assert "Confirm selected" not in page.text
    assert 'aria-label="suggested match' not in page.text
    export = re.search(r'href="(/console/resources/\d+/export.csv\?[^"]+)"', page.text)
    assert export is not None
    csv = api.get(html.unescape(export.group(1)))
    assert csv.status_code == 200
    assert len(csv.text.strip().splitlines()) == 1 + len(rows)


def test_confirm_one_is_the_apis_confirm_and_shows_as_manual_after_the_run(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    name = signed_in(api, runtime, tenant, "analyst")
    view = f"/console/reconciliations/{reconciliation_id}/suggestions"
    page = api.get(view)
    first, *_ = suggested_ids(api, tenant, output_id)
    assert f'aria-label="suggested match {first}"' in page.text
    answer = post(api, f"{view}/{first}/confirm", page="1", note="same invoice")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?confirmed={first}"
    (taken,) = actions(api, tenant, reconciliation_id)
    assert (taken["kind"], taken["match_id"], taken["actor"]) == ("confirm", first, name)
    # the output shows the match suggested until the run the confirmation queued
    assert first in suggested_ids(api, tenant, output_id)
    shown = api.get(answer.headers["location"])
    assert re.search(
        r'role="status">Confirmed match \d+\. The output shows it as manual', shown.text
    )
    assert f"Confirmed by {name}: shown as manual after the next run." in head_of(shown.text, first)
    run(runtime, reconciliation_id)
    assert first not in suggested_ids(api, tenant, output_id)
    matches = api.get(f"/console/reconciliations/{reconciliation_id}/matches?status=manual")
    assert f"Suggestion confirmed by {name}" in head_of(matches.text, first)
    assert "matches 1\u20131 of 1" in matches.text
    assert f"Dissolve match {first}" in matches.text


def test_reject_one_with_a_note(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    name = signed_in(api, runtime, tenant, "analyst")
    view = f"/console/reconciliations/{reconciliation_id}/suggestions"
    *_, last = suggested_ids(api, tenant, output_id)
    answer = post(api, f"{view}/{last}/reject", page="1", note="not the same payment")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?rejected={last}"
    (taken,) = actions(api, tenant, reconciliation_id)
    assert (taken["kind"], taken["note"], taken["actor"]) == (
        "reject",
        "not the same payment",
        name,
    )
    assert last in suggested_ids(api, tenant, output_id)  # until the run it queued
    shown = api.get(answer.headers["location"])
    assert f"Rejected by {name}" in head_of(shown.text, last)
    run(runtime, reconciliation_id)
    assert last not in suggested_ids(api, tenant, output_id)
    left = [r for r in data_rows(api, tenant, output_id, **{"bank._row": str(last)})]
    assert {r["status"] for r in left} == {"unmatched"}


def test_the_selected_confirmed_at_once_each_in_turn(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    name = signed_in(api, runtime, tenant, "admin")
    view = f"/console/reconciliations/{reconciliation_id}/suggestions"
    one, two, three = suggested_ids(api, tenant, output_id)
    answer = post(api, f"{view}/selected/confirm", page="1", match=[str(one), str(two)])
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?confirmed={one}%2C{two}"
    assert [
        (a["kind"], a["match_id"], a["actor"]) for a in actions(api, tenant, reconciliation_id)
    ] == [
        ("confirm", one, name),
        ("confirm", two, name),
    ]
    # one already confirmed: a 409 naming it, the other still done, the page says so
    refused = post(api, f"{view}/selected/confirm", page="1", match=[str(one), str(three)])
    assert refused.status_code == 409
    alert = re.search(r'role="alert" id="action-error">([^<]*)<', refused.text)
    assert alert is not None
    assert f"Match {one}: " in alert.group(1)
    assert f"manual match {one}" in alert.group(1)
    assert f"The others were confirmed: {three}." in alert.group(1)
    assert [a["match_id"] for a in actions(api, tenant, reconciliation_id)] == [one, two, three]
    # nothing selected: the page says what to do
    empty = post(api, f"{view}/selected/reject", page="1")
    assert empty.status_code == 400
    assert 'role="alert" id="action-error">Select at least one match.' in empty.text


def test_undo_of_a_manual_and_of_an_automatic_match(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    name = signed_in(api, runtime, tenant, "analyst")
    manual = runtime.reconciliations.match(
        workspace_id=tenant.workspace_id,
        reconciliation_id=reconciliation_id,
        left_rows=[6, 7],
        right_rows=[6],
        note="fees against the credit",
        actor="alice",
    )
    view = f"/console/reconciliations/{reconciliation_id}/matches"
    page = api.get(view)
    assert page.status_code == 200
    every = data_rows(api, tenant, output_id, status__in=",".join(MATCHED))
    ids = sorted({int(r["match_id"]) for r in every})
    assert f"matches 1\u2013{len(ids)} of {len(ids)}" in page.text
    assert sum(counts(api, tenant, reconciliation_id)[s] for s in MATCHED) == len(ids)
    for row in every:
        head = head_of(page.text, int(row["match_id"]))
        if row["difference"] is None:  # a match by hand shown at once: the run computes it
            assert 'difference <span class="muted">not known until the next run</span>' in head
        else:
            assert f'difference <span class="num">{row["difference"]}</span>' in head
        assert html.escape(row["reason"], quote=False) in head
    assert "Matched by hand by alice" in head_of(page.text, manual)
    assert "fees against the credit" in head_of(page.text, manual)
    assert "Undo dissolves this manual match" in page.text
    assert "Undo rejects this automatic match for good" in page.text
    # filters in the URL: status and pass
    only = api.get(view, params={"status": "matched_with_difference"})
    assert "matches 1\u20131 of 1" in only.text
    assert 'id="match-2"' in only.text
    by_pass = api.get(view, params={"pass": "same reference"})
    assert 'id="match-1"' in by_pass.text
    assert 'id="match-2"' not in by_pass.text
    # undo the manual match: dissolved, back to the view with its filters
    answer = post(api, f"{view}/{manual}/undo", status="manual", page="1", note="wrong fees")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?status=manual&undone={manual}&outcome=dissolved"
    shown = api.get(answer.headers["location"])
    assert f"Dissolved by {name}" in head_of(shown.text, manual)
    # undo an automatic match: rejected for good
    answer = post(api, f"{view}/1/undo", page="1", note="duplicate booking")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?undone=1&outcome=rejected"
    taken = actions(api, tenant, reconciliation_id)
    dissolved = next(a for a in taken if a["kind"] == "match")
    assert (dissolved["undo_actor"], dissolved["undo_note"]) == (name, "wrong fees")
    assert dissolved["undone_at"] is not None
    rejected = next(a for a in taken if a["kind"] == "reject")
    assert (rejected["actor"], rejected["note"], rejected["left_rows"]) == (
        name,
        "duplicate booking",
        [1],
    )
    # until the run the undos queued, the output shows both matches as they were
    before = {r["bank._row"]: r["status"] for r in data_rows(api, tenant, output_id)}
    assert (before["1"], before["6"], before["7"]) == ("matched", "manual", "manual")
    run(runtime, reconciliation_id)
    after = {r["bank._row"]: r["status"] for r in data_rows(api, tenant, output_id)}
    assert (after["1"], after["6"], after["7"]) == ("unmatched", "unmatched", "unmatched")
    # a match no longer there: the API's 404, on the page
    gone = post(api, f"{view}/1/undo", page="1")
    assert gone.status_code == 404
    assert 'role="alert" id="action-error">Match 1: Match not found.' in gone.text


def test_resolved_listed_and_reopened_at_once(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    name = signed_in(api, runtime, tenant, "analyst")
    resolution = runtime.reconciliations.resolve(
        workspace_id=tenant.workspace_id,
        reconciliation_id=reconciliation_id,
        side=SideName.LEFT,
        rows=[6, 7],
        reason="bank_fee",
        note="November fees",
        actor="alice",
    )
    view = f"/console/reconciliations/{reconciliation_id}/resolved"
    page = api.get(view)
    assert page.status_code == 200
    group = re.search(rf'<tbody id="resolution-{resolution.id}">(.*?)</tbody>', page.text, re.S)
    assert group is not None
    for row in data_rows(api, tenant, output_id, status="resolved"):
        assert f'<td class="num">{row["bank.amount"]}</td>' in group.group(1)
    assert "<code>bank_fee</code>" in group.group(1)
    assert "November fees" in group.group(1)
    assert "By alice" in group.group(1)
    answer = post(api, f"{view}/{resolution.id}/reopen", page="1", note="booked in December")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?reopened={resolution.id}"
    # at once, without a run: the rows are unmatched in the output
    assert data_rows(api, tenant, output_id, status="resolved") == []
    statuses = {r["bank._row"]: r["status"] for r in data_rows(api, tenant, output_id)}
    assert (statuses["6"], statuses["7"]) == ("unmatched", "unmatched")
    shown = api.get(answer.headers["location"])
    assert f'id="resolution-{resolution.id}"' not in shown.text
    reopened = re.search(r'<table id="reopened-resolutions">(.*?)</table>', shown.text, re.S)
    assert reopened is not None
    assert "booked in December" in reopened.group(1)
    assert name in reopened.group(1)
    (taken,) = actions(api, tenant, reconciliation_id)
    assert (taken["undo_actor"], taken["undo_note"]) == (name, "booked in December")
    again = post(api, f"{view}/{resolution.id}/reopen", page="1")
    assert again.status_code == 404
    assert f"Resolution {resolution.id}: Resolution not found." in again.text


def test_a_viewer_sees_every_view_and_cannot_act(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    signed_in(api, runtime, tenant, "viewer")
    base = f"/console/reconciliations/{reconciliation_id}"
    for view in ("suggestions", "matches", "resolved"):
        page = api.get(f"{base}/{view}")
        assert page.status_code == 200
        assert 'method="post" action="/console/reconciliations' not in page.text
    first = suggested_ids(api, tenant, output_id)[0]
    for forged in (
        f"{base}/suggestions/{first}/confirm",
        f"{base}/suggestions/{first}/reject",
        f"{base}/suggestions/selected/confirm",
        f"{base}/matches/1/undo",
        f"{base}/resolved/1/reopen",
    ):
        assert post(api, forged, match=str(first)).status_code == 403, forged
    assert actions(api, tenant, reconciliation_id) == []


def test_another_workspace_and_refused_urls(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _ = reconciled(runtime, tenant)
    other = make_tenant(runtime.engine)
    api.follow_redirects = False
    assert sign_in(api, make_user(runtime, other.workspace_id, "admin").name).status_code == 303
    base = f"/console/reconciliations/{reconciliation_id}"
    missing = api.get("/console/reconciliations/999999/matches")
    for view in ("suggestions", "matches", "resolved"):
        page = api.get(f"{base}/{view}")
        assert (page.status_code, page.text) == (404, missing.text)
    assert post(api, f"{base}/suggestions/3/confirm").status_code == 404
    assert post(api, f"{base}/matches/1/undo").status_code == 404
    signed_in(api, runtime, tenant, "analyst")
    for url, message in (
        (f"{base}/matches?status=nope", "unknown status &#39;nope&#39;"),
        (f"{base}/matches?pass=nope", "unknown pass &#39;nope&#39;"),
        (f"{base}/suggestions?page=x", "&#39;page&#39; must be a positive whole number"),
        (f"{base}/resolved?reopened_page=0", "&#39;reopened_page&#39; must be"),
    ):
        page = api.get(url)
        assert page.status_code == 400, url
        assert re.search(r'role="alert" id="action-error">[^<]*' + message, page.text), url
    long = post(api, f"{base}/matches/1/undo", note="x" * 10_001)
    assert long.status_code == 422
    assert "the note is longer than 10,000 characters" in long.text.lower()


def test_pages_of_whole_matches_and_a_split_match_grouped(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    # 27 suggestions (references differ, amounts and dates equal): two pages of 25
    bank = "reference,amount,txn_date\n" + "".join(
        f"B-{i},{i}.01,2024-01-05\n" for i in range(1, 28)
    )
    ledger = "reference,amount,txn_date\n" + "".join(
        f"L-{i},{i}.01,2024-01-05\n" for i in range(1, 28)
    )
    pair = Pair(
        make_source(runtime.engine, tenant, bank, name="bank, many").id,
        make_source(runtime.engine, tenant, ledger, name="ledger, many").id,
    )
    created = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(pair, name="Many")
    )
    run(runtime, created.id)
    signed_in(api, runtime, tenant, "viewer")
    view = f"/console/reconciliations/{created.id}/suggestions"
    first = api.get(view)
    assert "matches 1\u201325 of 27, page 1 of 2" in first.text
    assert f'href="{view}?page=2" rel="next"' in first.text
    second = api.get(view, params={"page": "2"})
    assert "matches 26\u201327 of 27, page 2 of 2" in second.text
    ids = sorted({int(r["match_id"]) for r in data_rows(api, tenant, created.resource_id)})
    assert re.findall(r'<tbody id="match-(\d+)">', second.text) == [str(i) for i in ids[25:]]
    assert f'href="{view}" rel="prev"' in second.text
    # a split payment: one bank row beside its two ledger rows, one match
    split = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(make_pair(runtime.engine, tenant))
    )
    run(runtime, split.id)
    page = api.get(
        f"/console/reconciliations/{split.id}/matches", params={"pass": "split payments"}
    )
    assert "matches 1\u20131 of 1" in page.text
    group = re.search(r'<tbody id="match-3">(.*?)</tbody>', page.text, re.S)
    assert group is not None
    lines = re.findall(r"<tr>(.*?)</tr>", group.group(1), re.S)
    assert len(lines) == 2
    assert ">20.25</td>" in lines[0]
    assert ">20.00</td>" in lines[0]
    assert ">20.25</td>" not in lines[1]
    assert ">0.25</td>" in lines[1]


def test_rejecting_a_confirmation_waiting_for_its_run_undoes_it_and_says_so(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    name = signed_in(api, runtime, tenant, "analyst")
    view = f"/console/reconciliations/{reconciliation_id}/suggestions"
    first, *_ = suggested_ids(api, tenant, output_id)
    assert post(api, f"{view}/{first}/confirm", page="1").status_code == 303
    # a page loaded before the confirmation still offers "Reject"
    answer = post(api, f"{view}/{first}/reject", page="1", note="changed my mind")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{view}?dissolved={first}"
    shown = api.get(answer.headers["location"])
    assert f'role="status">Match {first}: its confirmation, still waiting for its run' in shown.text
    (confirmation,) = actions(api, tenant, reconciliation_id)
    assert confirmation["kind"] == "confirm"
    assert (confirmation["undo_actor"], confirmation["undo_note"]) == (name, "changed my mind")
    run(runtime, reconciliation_id)
    assert first in suggested_ids(api, tenant, output_id)
