"""The workbench's Exceptions view over HTTP, both backends: each side's rows are the Data
API's answer to the view's query (ages from the dates, reasons from the output), sorted,
filtered and paged by the URL; Match and Resolve through the service the API calls, with
the API's statuses (422 a missing note, 409 a row taken, 400, 403 a viewer), the rows
gone from the view at once and the figures of GET /api/v2/reconciliations/{id} moved;
the candidates panel is the candidates endpoint's; each side's export is the view."""

from __future__ import annotations

import csv
import datetime as dt
import html as html_text
import io
import json
import re
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from markupsafe import escape

from support.console import SAME_ORIGIN, make_user, sign_in
from support.exceptions import BANK_CSV, NAMES, OPEN, reconciled
from support.factories import Tenant, make_tenant
from tally.runtime import Runtime


def signed_in(api: httpx.Client, runtime: Runtime, tenant: Tenant, role: str) -> httpx.Client:
    api.follow_redirects = False
    assert sign_in(api, make_user(runtime, tenant.workspace_id, role).name).status_code == 303
    return api


@pytest.fixture
def analyst(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> httpx.Client:
    return signed_in(api, runtime, tenant, "analyst")


def view(client: httpx.Client, reconciliation_id: int, **query: str) -> httpx.Response:
    return client.get(f"/console/reconciliations/{reconciliation_id}/exceptions", params=query)


def table_rows(page: str, side: str) -> list[int]:
    """The rows of a side's table, in their order, by their checkboxes."""
    table = page.split(f'data-side="{side}"', 1)[1].split("</table>", 1)[0]
    return [int(r) for r in re.findall(rf'name="{side}" value="(\d+)"', table)]


def data_api_query(page: str, side: str) -> list[tuple[str, str]]:
    """The query the page says the side is (its Data API line), unescaped."""
    name = NAMES[side]
    found = re.findall(r"GET /api/v1/resources/\d+/data\?([^<]*)</code>", page)
    mine = next(q for q in found if f"{name}._row__gte" in html_text.unescape(q))
    return parse_qsl(html_text.unescape(mine))


def data_api(client: httpx.Client, tenant: Tenant, output_id: int, query: Any) -> Any:
    answer = client.get(f"/api/v1/resources/{output_id}/data", params=query, headers=tenant.headers)
    assert answer.status_code == 200, answer.text
    return json.loads(answer.text, parse_float=str)  # decimals as their text


def match(client: httpx.Client, reconciliation_id: int, **form: Any) -> httpx.Response:
    return client.post(
        f"/console/reconciliations/{reconciliation_id}/exceptions",
        data={"action": "match", **form},
        headers=SAME_ORIGIN,
    )


def test_both_sides_side_by_side_oldest_first_with_ages_and_reasons_as_the_data_api_says(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    answer = view(analyst, reconciliation_id)
    assert answer.status_code == 200
    page = answer.text
    today = dt.datetime.now(dt.UTC).date()
    for side, name in NAMES.items():
        query = data_api_query(page, side)
        assert ("status", "unmatched") in query
        assert ("ordering", f"{name}.txn_date") in query
        rows = data_api(analyst, tenant, output_id, [*query, ("page_size", "50")])["data"]
        assert table_rows(page, side) == [r[f"{name}._row"] for r in rows]
        assert sorted(table_rows(page, side)) == OPEN[side]
        for row in rows:
            age = (today - dt.date.fromisoformat(row[f"{name}.txn_date"])).days
            cells = re.search(
                rf'aria-label="{name} row {row[f"{name}._row"]}".*?</tr>', page, re.DOTALL
            )
            assert cells is not None
            shown = cells.group(0)
            assert f'<td class="num">{age}</td>' in shown
            assert str(escape(row["reason"])) in shown
            assert f'<td class="num">{row[f"{name}.amount"]}</td>' in shown
        assert f"{name}: rows 1\u2013{len(rows)} of {len(rows)}" in page
    assert "&lt;b&gt;" not in page or "<b>refund" not in page  # (memo not shown; escaped)
    assert 'role="region" aria-label="Selection" aria-live="polite"' in page
    assert table_rows(page, "left")[0] == 5  # 2024-01-01, the oldest


def test_sort_filter_and_page_live_in_the_url_per_side(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    many = BANK_CSV + "".join(f"M-{n},{n}.01,2024-02-{1 + n % 28:02d},many\n" for n in range(1, 61))
    reconciliation_id, output_id = reconciled(runtime, tenant, bank=many)
    page = view(analyst, reconciliation_id, left_sort="-amount", left_page="2").text
    query = data_api_query(page, "left")
    assert ("ordering", "-bank.amount") in query
    expected = data_api(analyst, tenant, output_id, [*query, ("page", "2"), ("page_size", "50")])
    assert table_rows(page, "left") == [r["bank._row"] for r in expected["data"]]
    assert "bank: rows 51\u201365 of 65" in page
    assert "ledger: rows 1\u20134 of 4" in page  # the other side untouched
    assert 'aria-sort="descending"' in page
    # the other side's links keep this side's state
    assert "exceptions?left_sort=-amount&amp;left_page=2&amp;right_sort=-date" in page
    filtered = view(
        analyst,
        reconciliation_id,
        left_min="0.15",
        left_max="100",
        left_from="2024-01-02",
        left_to="2024-02-05",
        left_sort="age",
        right_text="C-2",
    ).text
    left = data_api(
        analyst, tenant, output_id, [*data_api_query(filtered, "left"), ("page_size", "50")]
    )
    assert table_rows(filtered, "left") == [r["bank._row"] for r in left["data"]]
    assert all(r["bank.txn_date"] >= "2024-01-02" for r in left["data"])
    dates = [r["bank.txn_date"] for r in left["data"]]
    assert dates == sorted(dates, reverse=True)  # the oldest last: age ascending
    assert table_rows(filtered, "right") == [3]
    refused = view(analyst, reconciliation_id, left_min="lots")
    assert refused.status_code == 400
    assert 'role="alert"' in refused.text
    assert view(analyst, reconciliation_id, left_sort="nope").status_code == 400


def test_match_with_zero_difference_is_recorded_and_its_rows_leave_at_once(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    before = analyst.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    # 0.10 + 0.20 against 0.30: zero exactly (a float says 0.30000000000000004)
    answer = match(
        analyst, reconciliation_id, left=["2", "3"], right=["2"], view="left_sort=-amount"
    )
    assert answer.status_code == 303
    target = answer.headers["location"]
    assert target.startswith(
        f"/console/reconciliations/{reconciliation_id}/exceptions?left_sort=-amount&"
    )
    page = analyst.get(target).text
    assert "Matched bank rows 2, 3 with ledger row 2 (match 2)." in page
    assert 2 not in table_rows(page, "left")
    assert 3 not in table_rows(page, "left")
    assert 2 not in table_rows(page, "right")
    rows = data_api(analyst, tenant, output_id, {"bank._row__in": "2,3", "page_size": "10"})["data"]
    assert {r["status"] for r in rows} == {"manual"}
    for side, name in NAMES.items():  # the count the page takes from last_run is the API's
        total = data_api(analyst, tenant, output_id, data_api_query(page, side))["meta"]
        shown = len(table_rows(page, side))
        assert f"{name}: rows 1\u2013{shown} of {total['total_count']}" in page
    after = analyst.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    counts = (before.json()["last_run"]["counts"], after.json()["last_run"]["counts"])
    assert counts[1]["manual"] == counts[0]["manual"] + 1
    assert counts[1]["unmatched_left"] == counts[0]["unmatched_left"] - 2
    actions = analyst.get(
        f"/api/v2/reconciliations/{reconciliation_id}/actions", headers=tenant.v2_headers
    ).json()
    assert actions["data"][-1]["actor"].startswith("analyst-")
    # the big amounts balance too
    assert match(analyst, reconciliation_id, left=["4"], right=["3"]).status_code == 303


def test_a_difference_needs_a_note_then_is_recorded_with_it(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    # 12345678901234567.89 + 0.10 against 12345678901234567.89: 0.10 apart
    refused = match(analyst, reconciliation_id, left=["4", "2"], right=["3"], note="")
    assert refused.status_code == 422
    page = refused.text
    note_error = re.search(r'id="note-error" role="alert">(.*?)</div>', page, re.DOTALL)
    assert note_error is not None
    assert "differ by 0.10" in note_error.group(1)
    assert 'aria-describedby="note-error"' in page
    assert 'data-sum="left">12345678901234567.99<' in page  # server-side, exact
    assert "data-difference>0.10<" in page
    assert re.search(r'value="4"[^>]*aria-label="bank row 4" checked', page)
    too_long = match(analyst, reconciliation_id, left=["4", "2"], right=["3"], note="n" * 10_001)
    assert too_long.status_code == 422
    assert "the note is longer than 10000 characters" in too_long.text
    recorded = match(analyst, reconciliation_id, left=["4", "2"], right=["3"], note="rounding")
    assert recorded.status_code == 303
    runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
    rows = data_api(analyst, tenant, output_id, {"status": "manual", "page_size": "10"})["data"]
    assert {r["difference"] for r in rows} == {"0.10"}


def test_a_row_already_matched_is_a_409_naming_it(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _ = reconciled(runtime, tenant)
    assert match(analyst, reconciliation_id, left=["2", "3"], right=["2"]).status_code == 303
    taken = match(analyst, reconciliation_id, left=["3"], right=["4"], note="again")
    assert taken.status_code == 409
    rows_error = re.search(r'id="rows-error" role="alert">(.*?)</div>', taken.text, re.DOTALL)
    assert rows_error is not None
    assert "bank row 3 is already in manual match 2" in rows_error.group(1)
    one_side = match(analyst, reconciliation_id, left=["5"])
    assert one_side.status_code == 400
    assert "each side" in one_side.text


def test_resolve_closes_rows_of_one_side_with_a_reason(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    url = f"/console/reconciliations/{reconciliation_id}/exceptions"
    both = analyst.post(
        url, data={"action": "resolve", "left": "6", "right": "4", "reason": "bank_fee"},
        headers=SAME_ORIGIN,
    )  # fmt: skip
    assert both.status_code == 400
    assert "one side only" in both.text
    unknown = analyst.post(
        url, data={"action": "resolve", "left": "6", "reason": "lunch"}, headers=SAME_ORIGIN
    )
    assert unknown.status_code == 422
    assert re.search(r'id="reason-error" role="alert">.*unknown reason', unknown.text, re.DOTALL)
    done = analyst.post(
        url,
        data={"action": "resolve", "left": "6", "reason": "bank_fee", "note": "Nov fee"},
        headers=SAME_ORIGIN,
    )
    assert done.status_code == 303
    page = analyst.get(done.headers["location"]).text
    assert re.search(r"Resolved bank row 6 \(resolution \d+\)\.", page)
    assert 6 not in table_rows(page, "left")
    row = data_api(analyst, tenant, output_id, {"bank._row": "6"})["data"][0]
    assert row["status"] == "resolved"
    shown = analyst.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    assert shown.json()["last_run"]["counts"]["resolved_left"] == 1


def test_the_candidates_panel_is_the_candidates_endpoints(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _ = reconciled(runtime, tenant)
    page = view(analyst, reconciliation_id, candidates="left:5", left_sort="-date").text
    found = analyst.get(
        f"/api/v2/reconciliations/{reconciliation_id}/rows/left/5/candidates",
        headers=tenant.v2_headers,
    ).json()
    panel = page.split('id="candidates"', 1)[1].split("</section>", 1)[0]
    assert "Candidates of bank row 5" in panel
    for found_pass in found["passes"]:
        assert str(escape(found_pass["name"])) in panel
        for candidate in found_pass["candidates"]:
            assert f'aria-label="ledger row {candidate["row"]}"' in panel
            for condition in candidate["conditions"]:
                assert str(escape(condition["detail"])) in panel
    assert 'aria-label="ledger row 5"' in panel  # B-4's reference, 0.05 and 29 days off
    assert "left_sort=-date" in page.split('id="candidates"', 1)[1]  # (Close keeps the state)
    assert view(analyst, reconciliation_id, candidates="left:99").status_code == 200


def test_each_sides_export_is_its_view_in_full(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    page = view(analyst, reconciliation_id, left_sort="amount").text
    links = re.findall(r'href="(/console/reconciliations/\d+/exceptions/export\.csv\?[^"]*)"', page)
    assert len(links) == 2
    exported = analyst.get(html_text.unescape(links[0]))
    assert exported.status_code == 200
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    query = [(k, v) for k, v in data_api_query(page, "left") if k not in ("page", "page_size")]
    expected = data_api(analyst, tenant, output_id, [*query, ("page_size", "1000")])["data"]
    assert [r["bank._row"] for r in rows] == [str(r["bank._row"]) for r in expected]
    assert [r["bank.amount"] for r in rows] == [
        "-7.25",
        "-2.50",
        "0.10",
        "0.20",
        "12345678901234567.89",
    ]


def test_a_viewer_sees_the_view_and_a_forged_post_is_403(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant)
    viewer = signed_in(api, runtime, tenant, "viewer")
    page = view(viewer, reconciliation_id).text
    assert table_rows(page, "left")
    assert 'id="match-button"' not in page
    assert match(viewer, reconciliation_id, left=["2", "3"], right=["2"]).status_code == 403
    rows = data_api(viewer, tenant, output_id, {"bank._row": "2"})["data"]
    assert rows[0]["status"] == "unmatched"


def test_another_workspaces_reconciliation_is_the_missing_page(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    theirs, _ = reconciled(runtime, make_tenant(runtime.engine))
    missing = view(analyst, 2_000_000_000)
    other = view(analyst, theirs)
    assert missing.status_code == other.status_code == 404
    assert missing.text == other.text
    assert match(analyst, theirs, left=["2"], right=["2"]).status_code == 404


def test_a_reconciliation_never_run_says_so(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _ = reconciled(runtime, tenant, run=False)
    answer = view(analyst, reconciliation_id)
    assert answer.status_code == 200
    assert "Not run yet" in answer.text
    assert 'aria-current="page">Exceptions' in answer.text
