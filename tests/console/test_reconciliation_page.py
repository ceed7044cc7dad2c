"""A reconciliation's console page (issue #33's screen 5) and the overview's figures over
HTTP, both backends: every figure equal to GET /api/v2/reconciliations/{id} and to what
the Data API's rows add up to; shares by value over credits and debits; the oldest
unmatched item's age on a fixed clock; another workspace's id, a reconciliation never
run, one whose last run failed, one run before tally kept these figures."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import ROUND_DOWN, Decimal
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from markupsafe import escape as html_escape

from support.console import SAME_ORIGIN, make_user, sign_in
from support.console_reconciliations import reconciled
from support.factories import Tenant, append, make_source, make_tenant
from support.reconciliations import Pair, definition
from tally.console.reconciliation import match_statuses
from tally.core.clock import utc_now
from tally.runtime import Runtime
from tally.services.derived.phases import STARTING
from tally.services.reconciliation.service import ReconciliationService
from tally.services.reconciliation_summary import ReconciliationSummaries
from tally.services.resource_listing import ResourceListing
from tally.storage.derived import records as derived_records
from tally.storage.engine import write_connection
from tally.storage.schema import derived_resources as derived_table

STATUSES = ("matched", "matched_with_difference", "suggested", "manual", "unmatched", "resolved")
ROW_STATUSES = ("unmatched", "resolved")  # counted by rows per side
SIDES = {"left": "bank", "right": "ledger"}
KEYS = [{"left": "reference", "right": "reference"}]
TODAY = dt.datetime(2024, 2, 1, 12, tzinfo=dt.UTC)


@pytest.fixture
def browser(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> httpx.Client:
    """The API's client signed in to the console as a viewer of `tenant`."""
    api.follow_redirects = False
    assert sign_in(api, make_user(runtime, tenant.workspace_id, "viewer").name).status_code == 303
    return api


def output_rows(api: httpx.Client, tenant: Tenant, resource_id: int, **filters: str) -> Any:
    answer = api.get(
        f"/api/v1/resources/{resource_id}/data",
        headers=tenant.headers,
        params={"page_size": "1000", **filters},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def floor_percent(part: Decimal, whole: Decimal) -> str:
    return str((part * 100 / whole).quantize(Decimal("0.1"), rounding=ROUND_DOWN))


def amounts_line(html: str, name: str) -> list[str]:
    """The Amounts table's figures of one side (no currencies): matched, then per match
    status, unmatched, resolved and the share by value, as the page shows them."""
    table = html.split('<h2 id="amounts">', 1)[1].split("</table>", 1)[0]
    [line] = [r for r in table.split("<tr>") if f'<th scope="row">{name}</th>' in r]
    cells = re.findall(r'<td[^>]* class="num"[^>]*>(.*?)</td>', line)
    return [re.sub(r"<[^>]+>", "", cell) for cell in cells]


def figures_agree(
    browser: httpx.Client, tenant: Tenant, reconciliation_id: int, output_id: int
) -> tuple[dict[str, Any], str]:
    """The page's figures are GET /api/v2/reconciliations/{id}'s and what the Data API's
    rows add up to (counts per status, amounts signed and absolute, shares, the oldest
    unmatched date): last_run and the page's HTML."""
    shown = browser.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    last_run: dict[str, Any] = shown.json()["last_run"]
    counts = last_run["counts"]
    page = browser.get(f"/console/reconciliations/{reconciliation_id}")
    assert page.status_code == 200
    html = page.text
    # counts by status: the API's, and the Data API's rows of each status (one row a
    # match here: no group), each linked to its rows filtered by that status
    for status in STATUSES:
        rows = output_rows(browser, tenant, output_id, status=status)["meta"]["total_count"]
        if status in ROW_STATUSES:
            assert rows == counts[f"{status}_left"] + counts[f"{status}_right"]
            row = re.search(rf"<th scope=\"row\">{status}</th>\s*<td class=\"num\">([^<]*)<", html)
            assert row is not None, status
            for side, name in SIDES.items():
                assert f"{counts[f'{status}_{side}']} {name} row" in row.group(1)
        else:
            assert rows == counts[status]
            assert re.search(
                rf"<th scope=\"row\">{status}</th>\s*<td class=\"num\">{rows} match", html
            )
        assert f'href="/console/resources/{output_id}?status={status}"' in html
    # amounts per side: the API's, and the sum of the Data API's rows (each input row once)
    # and per match status (`matched_by_status`), shown in the Amounts table's line
    every = output_rows(browser, tenant, output_id)["data"]
    for side, name in SIDES.items():
        per_status = {status: Decimal(0) for status in STATUSES}
        per_status_absolute = dict(per_status)
        seen = {r[f"{name}._row"]: r for r in every if r[f"{name}._row"] is not None}
        for row in seen.values():
            per_status[row["status"]] += Decimal(str(row[f"{name}.amount"]))
            per_status_absolute[row["status"]] += abs(Decimal(str(row[f"{name}.amount"])))
        for figure, found in (("amounts", per_status), ("absolute_amounts", per_status_absolute)):
            totals = last_run[figure][side]
            split = {k: Decimal(v) for k, v in totals["matched_by_status"].items()}
            assert split == {k: v for k, v in found.items() if k not in ROW_STATUSES}
            assert sum(split.values()) == Decimal(totals["matched"])
            assert [Decimal(totals[k]) for k in ROW_STATUSES] == [found[k] for k in ROW_STATUSES]
        closed = sum(per_status_absolute.values()) - per_status_absolute["unmatched"]
        whole = sum(per_status_absolute.values())
        shown = last_run["amounts"][side]
        assert amounts_line(html, name) == [
            shown["matched"],
            *(shown["matched_by_status"][s] for s in STATUSES if s not in ROW_STATUSES),
            shown["unmatched"],
            shown["resolved"],
            f"{floor_percent(closed, whole)} %",
        ]
        rows = len(seen)
        assert floor_percent(Decimal(rows - counts[f"unmatched_{side}"]), Decimal(rows)) in html
        unmatched = [r for r in seen.values() if r["status"] == "unmatched"]
        oldest = min(r[f"{name}.txn_date"] for r in unmatched)
        assert last_run["oldest_unmatched"][side] == {
            "date": oldest,
            "rows": sum(r[f"{name}.txn_date"] == oldest for r in unmatched),
        }
        assert f'<time datetime="{oldest}">' in html
    return last_run, html


def test_every_figure_is_the_apis_and_the_data_apis(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id, pair = reconciled(runtime, tenant)
    last_run, html = figures_agree(browser, tenant, reconciliation_id, output_id)
    counts = last_run["counts"]
    assert counts["unmatched_left"] + counts["unmatched_right"] == 4
    assert (counts["matched"], counts["matched_with_difference"], counts["suggested"]) == (1, 1, 1)
    assert f'href="/console/resources/{output_id}">Rows</a>' in html
    assert f'href="/console/sources/{pair.bank}">bank statement</a>' in html
    assert f'href="/console/sources/{pair.ledger}">ledger</a>' in html
    assert "&lt;b&gt;refund" not in html  # no row of the output on this page


def test_a_manual_match_moves_its_amounts_to_manual_at_once_as_the_run_counts_them(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """Bank row 4 (12.00) matched by hand with ledger row 5 (8.00): at once each row's
    amount leaves `unmatched` for the `manual` status (signed and absolute), and the
    run the match queues counts the same; the page shows them, every figure agreeing."""
    reconciliation_id, output_id, _ = reconciled(runtime, tenant)
    before, _ = figures_agree(browser, tenant, reconciliation_id, output_id)
    body = {"left_rows": [4], "right_rows": [5], "note": "one transfer, fee taken"}
    url = f"/api/v2/reconciliations/{reconciliation_id}/matches"
    made = browser.post(url, json=body, headers=tenant.v2_headers)
    assert made.status_code == 201, made.text
    shown = browser.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    at_once = shown.json()["last_run"]
    for side, amount in (("left", "12.00"), ("right", "8.00")):
        split = at_once["amounts"][side]["matched_by_status"]
        assert split == {**before["amounts"][side]["matched_by_status"], "manual": amount}
        assert at_once["absolute_amounts"][side]["matched_by_status"]["manual"] == amount
    runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
    ran, html = figures_agree(browser, tenant, reconciliation_id, output_id)
    for figure in ("amounts", "absolute_amounts"):
        assert ran[figure] == at_once[figure], figure
    assert amounts_line(html, "bank")[4] == "12.00"  # the manual column


def test_a_resolution_of_the_oldest_row_moves_every_figure_at_once_and_its_undo_back(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """Bank row 3 (A-3, -7.25, 2024-01-02) is the oldest unmatched: resolved by an
    analyst, the page, GET and the Data API agree at once (before any run), the oldest
    moves on to 2024-01-09 and the resolved row counts as reconciled (by count 4 of 5,
    by value |100| + |-40| + |55| + |-7.25| of 214.25); undone, all as before; the run
    the action queued gives the same figures."""
    reconciliation_id, output_id, _ = reconciled(runtime, tenant)
    before, _ = figures_agree(browser, tenant, reconciliation_id, output_id)
    url = f"/api/v2/reconciliations/{reconciliation_id}/resolutions"
    body = {"side": "left", "rows": [3], "reason": "write_off"}
    made = browser.post(url, json=body, headers=tenant.v2_headers)
    assert made.status_code == 201, made.text
    resolved, html = figures_agree(browser, tenant, reconciliation_id, output_id)
    assert (resolved["counts"]["unmatched_left"], resolved["counts"]["resolved_left"]) == (1, 1)
    assert resolved["amounts"]["left"]["resolved"] == "-7.25"
    assert resolved["absolute_amounts"]["left"]["resolved"] == "7.25"
    assert resolved["absolute_amounts"]["left"]["unmatched"] == "12.00"
    assert resolved["oldest_unmatched"]["left"] == {"date": "2024-01-09", "rows": 1}
    assert resolved["oldest_unmatched"]["right"] == before["oldest_unmatched"]["right"]
    assert "80.0 %" in html
    assert floor_percent(Decimal("202.25"), Decimal("214.25")) == "94.3"
    assert "94.3 %" in html
    assert re.search(r'<td class="num">-7\.25</td>', html)  # the Amounts table's Resolved
    runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
    ran, _ = figures_agree(browser, tenant, reconciliation_id, output_id)
    for figure in ("counts", "amounts", "absolute_amounts", "oldest_unmatched"):
        assert ran[figure] == resolved[figure], figure
    undone = browser.request(
        "DELETE", f"{url}/{made.json()['id']}", json={}, headers=tenant.v2_headers
    )
    assert undone.status_code == 200, undone.text
    reopened, _ = figures_agree(browser, tenant, reconciliation_id, output_id)
    for figure in ("counts", "amounts", "absolute_amounts", "oldest_unmatched"):
        assert reopened[figure] == before[figure], figure


def test_share_by_value_counts_credits_and_debits_alike(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """bank: 100.00 and -40.00 reconciled, -7.25, 12.00 and 55.00 not (a suggestion is
    in a match: reconciled too): |100| + |-40| + |55| of |100| + |-40| + |-7.25| + |12| +
    |55|; signed totals would give 115.00 of 119.75."""
    reconciliation_id, _, pair = reconciled(runtime, tenant)
    listing = ResourceListing(runtime.engine, clock=lambda: TODAY)
    summaries = ReconciliationSummaries(
        ReconciliationService(runtime.engine), listing, clock=lambda: TODAY
    )
    summary = summaries.get(workspace_id=tenant.workspace_id, reconciliation_id=reconciliation_id)
    assert summary.figures is not None
    bank, ledger = summary.figures.sides
    assert bank.reconciled_by_value_percent == floor_percent(Decimal("195.00"), Decimal("214.25"))
    assert bank.reconciled_by_value_percent == "91.0"
    assert ledger.reconciled_by_value_percent == floor_percent(Decimal("195.03"), Decimal("206.03"))
    assert (bank.reconciled_percent, ledger.reconciled_percent) == ("60.0", "60.0")
    # the oldest unmatched item, today (UTC) minus its date
    assert (bank.oldest_unmatched_date, bank.oldest_unmatched_days) == (dt.date(2024, 1, 2), 30)
    assert (ledger.oldest_unmatched_date, ledger.oldest_unmatched_days) == (dt.date(2024, 1, 3), 29)
    # the overview's and GET /api/v2/resources' figures are the same
    [listed] = [
        r for r in listing.list_page(workspace_id=tenant.workspace_id).resources if r.derived
    ]
    assert listed.derived is not None
    assert listed.derived.reconciliation == summary.figures
    # a side without a date column has no age
    undated = definition(pair, name="undated")
    for side in ("left", "right"):
        undated[side]["date"] = None
    undated["passes"] = [{"name": "same reference", "type": "one_to_one", "keys": KEYS}]
    created = runtime.reconciliations.create(workspace_id=tenant.workspace_id, body=undated)
    runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    figures = summaries.get(workspace_id=tenant.workspace_id, reconciliation_id=created.id).figures
    assert figures is not None
    assert [s.oldest_unmatched_date for s in figures.sides] == [None, None]
    assert figures.sides[0].reconciled_by_value_percent is not None


def test_resources_api_gives_the_overviews_figures(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    tenant = ingestion_tenant
    reconciliation_id, output_id, _ = reconciled(runtime, tenant)
    listed = api.get("/api/v2/resources", headers=tenant.v2_headers).json()["data"]
    [output] = [r for r in listed if r["id"] == output_id]
    derived = output["derived"]
    assert (derived["id"], derived["state"], derived["error"]) == (reconciliation_id, "idle", None)
    figures = derived["reconciliation"]
    assert (figures["matches"], figures["suggested"], figures["has_value_and_age"]) == (2, 1, True)
    bank, ledger = figures["sides"]
    assert bank["reconciled_by_value_percent"] == "91.0"
    assert bank["oldest_unmatched_date"] == "2024-01-02"
    assert ledger["unmatched_amount"] == "5.00"
    assert isinstance(bank["oldest_unmatched_days"], int)
    assert [r["derived"] for r in listed if r["kind"] == "source"] == [None, None]


def test_another_workspaces_or_no_reconciliation_is_the_missing_page(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    theirs, _, _ = reconciled(runtime, make_tenant(runtime.engine))
    ours, output_id, _ = reconciled(runtime, tenant, run=False)
    missing = browser.get("/console/reconciliations/999999")
    assert missing.status_code == 404
    for other in (theirs, 2**40, "not-a-number"):
        answer = browser.get(f"/console/reconciliations/{other}")
        assert (answer.status_code, answer.text) == (404, missing.text), other
    transformation = runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={"name": "t", "inputs": {"b": ours and output_id}, "sql": "SELECT status FROM b"},
    )
    assert browser.get(f"/console/reconciliations/{transformation.id}").status_code == 404


def test_a_reconciliation_never_run_says_so(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id, _ = reconciled(runtime, tenant, run=False)
    page = browser.get(f"/console/reconciliations/{reconciliation_id}")
    assert page.status_code == 200
    assert "Not run yet" in page.text
    assert f'href="/console/resources/{output_id}">Rows</a>' in page.text


def test_a_run_under_way_shows_its_phase_as_the_api_does(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    runtime.reconciliations.queue_run(
        workspace_id=tenant.workspace_id, reconciliation_id=reconciliation_id
    )
    now = utc_now()
    with write_connection(runtime.engine) as conn, conn.begin():  # a worker's run, matching
        claimed = derived_records.claim_due(
            conn, worker="w", now=now, lease_seconds=60, phase=STARTING
        )
        assert claimed is not None
        assert derived_records.record_phase(conn, claimed.id, "w", phase="matching", now=now)
    shown = browser.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    run = shown.json()["run"]
    assert (run["phase"], run["phase_since"]) == ("matching", now.isoformat())
    page = browser.get(f"/console/reconciliations/{reconciliation_id}").text
    assert (
        '<span class="status-running">running</span> <span class="run-phase">(matching since '
        f'<time datetime="{now.isoformat()}">'
    ) in page


def test_a_failed_run_shows_its_error_in_full_beside_the_last_good_figures(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    with runtime.engine.begin() as conn:  # a definition this version cannot run
        stored = conn.execute(
            sa.select(derived_table.c.definition).where(derived_table.c.id == reconciliation_id)
        ).scalar_one()
        broken = {**stored, "left": {**stored["left"], "amount": "gone <script>"}}
        conn.execute(
            sa.update(derived_table)
            .where(derived_table.c.id == reconciliation_id)
            .values(definition=broken)
        )
    runtime.reconciliations.queue_run(
        workspace_id=tenant.workspace_id, reconciliation_id=reconciliation_id
    )
    deadline = utc_now() + dt.timedelta(seconds=30)  # its attempts, then failed for good
    while (
        runtime.reconciliations.get(
            workspace_id=tenant.workspace_id, derived_id=reconciliation_id
        ).state
        != "failed"
        and utc_now() < deadline
    ):
        runtime.derived.run_one(worker="test")
    shown = browser.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    assert shown.json()["state"] == "failed"
    error = shown.json()["error"]
    page = browser.get(f"/console/reconciliations/{reconciliation_id}").text
    assert "The last run failed." in page
    assert error.replace("'", "&#39;").replace("<", "&lt;").replace(">", "&gt;") in page
    assert "<script>" not in page
    assert "91.0 %" in page  # the last good run's figures stay


def test_a_run_before_these_figures_waits_for_the_next(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    with runtime.engine.begin() as conn:
        last_run = conn.execute(
            sa.select(derived_table.c.last_run).where(derived_table.c.id == reconciliation_id)
        ).scalar_one()
        older = {
            k: v for k, v in last_run.items() if k not in ("absolute_amounts", "oldest_unmatched")
        }
        conn.execute(
            sa.update(derived_table)
            .where(derived_table.c.id == reconciliation_id)
            .values(last_run=older)
        )
    for path in (f"/console/reconciliations/{reconciliation_id}", "/console/overview"):
        page = browser.get(path).text
        assert "not known until the next run" in page, path
        assert "91.0 %" not in page
    again = runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
    assert again.last_run is not None
    assert again.last_run["mode"] == "full"  # nothing to adjust: counted afresh, once
    assert "91.0 %" in browser.get("/console/overview").text


def test_a_run_before_the_amounts_per_status_waits_for_the_next(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """A last run without `matched_by_status`: the page says the amounts per status are
    not known until the next run, an analyst's action moves the other figures and keeps
    the split absent, and the next run is full (nothing to adjust) and gives it."""
    reconciliation_id, output_id, pair = reconciled(runtime, tenant)
    with runtime.engine.begin() as conn:
        last_run = conn.execute(
            sa.select(derived_table.c.last_run).where(derived_table.c.id == reconciliation_id)
        ).scalar_one()
        older = copy.deepcopy(last_run)
        for figure in ("amounts", "absolute_amounts"):
            for totals in older[figure].values():
                del totals["matched_by_status"]
        conn.execute(
            sa.update(derived_table)
            .where(derived_table.c.id == reconciliation_id)
            .values(last_run=older)
        )
    page = browser.get(f"/console/reconciliations/{reconciliation_id}").text
    assert "matched amounts per match status: they are not known until the next run" in page
    assert amounts_line(page, "bank")[1] == "not known until the next run"
    url = f"/api/v2/reconciliations/{reconciliation_id}/resolutions"
    body = {"side": "left", "rows": [3], "reason": "write_off"}
    assert browser.post(url, json=body, headers=tenant.v2_headers).status_code == 201
    shown = browser.get(f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers)
    moved = shown.json()["last_run"]
    assert moved["amounts"]["left"] == {
        "matched": "115.00",
        "unmatched": "12.00",
        "resolved": "-7.25",
    }
    assert "matched_by_status" not in moved["absolute_amounts"]["left"]
    append(runtime, pair.bank, "reference,amount,txn_date,memo\nA-9,1.00,2024-01-20,late\n")
    again = runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
    assert again.last_run is not None
    assert again.last_run["mode"] == "full"
    _, html = figures_agree(browser, tenant, reconciliation_id, output_id)
    assert "not known until the next run" not in html


def test_the_overview_links_each_resource_to_its_page_and_its_rows(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id, pair = reconciled(runtime, tenant)
    html = browser.get("/console/overview").text
    assert f'href="/console/sources/{pair.bank}">bank statement</a>' in html
    assert f'href="/console/reconciliations/{reconciliation_id}">Bank vs ledger</a>' in html
    for resource_id in (pair.bank, pair.ledger, output_id):
        assert f'href="/console/resources/{resource_id}" class="rows-link"' in html
    assert "91.0 %" in html  # the bank's share by value


def test_an_action_that_closes_every_kept_date_shows_the_oldest_not_known(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """66 bank rows unmatched, one a day: a run keeps the 64 earliest dates. All 64 rows
    of them resolved at once: the oldest is among the dates not kept, so GET gives
    `{"date": null, "rows": null}`, GET /api/v2/resources `oldest_unmatched_known` false
    and the page "not known until the next run" (never a wrong age); the run the action
    queued (full) finds Mar 6; the resolution undone, Jan 1 again at once."""
    header = "reference,amount,txn_date,memo\n"
    first = dt.date(2024, 1, 1)
    days = [first + dt.timedelta(days=n) for n in range(66)]
    bank = make_source(
        runtime.engine,
        tenant,
        header + "".join(f"B-{n},1.00,{day.isoformat()},x\n" for n, day in enumerate(days)),
        name="bank statement",
    )
    ledger = make_source(runtime.engine, tenant, header + "L-1,1.00,2024-01-01,x\n", name="ledger")
    body = definition(Pair(bank.id, ledger.id))
    body["passes"] = [{"name": "same reference", "type": "one_to_one", "keys": KEYS}]
    created = runtime.reconciliations.create(workspace_id=tenant.workspace_id, body=body)
    runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    url = f"/api/v2/reconciliations/{created.id}"
    resolve = {"side": "left", "rows": list(range(1, 65)), "reason": "timing"}
    made = browser.post(f"{url}/resolutions", json=resolve, headers=tenant.v2_headers)
    assert made.status_code == 201, made.text
    last_run = browser.get(url, headers=tenant.v2_headers).json()["last_run"]
    assert last_run["oldest_unmatched"]["left"] == {"date": None, "rows": None}
    assert last_run["counts"]["unmatched_left"] == 2
    html = browser.get(f"/console/reconciliations/{created.id}").text
    bank_row = re.search(r"bank <span class=\"muted\">\(left\)</span></th>(.*?)</tr>", html, re.S)
    assert bank_row is not None
    assert "not known until the next run" in bank_row.group(1)
    assert "days" not in bank_row.group(1)
    listed = browser.get("/api/v2/resources", headers=tenant.v2_headers).json()["data"]
    [figures] = [r["derived"]["reconciliation"] for r in listed if r["id"] == created.resource_id]
    assert figures["sides"][0]["oldest_unmatched_known"] is False
    assert figures["sides"][0]["oldest_unmatched_date"] is None
    assert figures["sides"][0]["resolved_rows"] == 64
    assert figures["sides"][1]["oldest_unmatched_known"] is True
    runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    ran = browser.get(url, headers=tenant.v2_headers).json()["last_run"]
    assert ran["mode"] == "full"
    assert ran["oldest_unmatched"]["left"] == {"date": days[64].isoformat(), "rows": 1}
    undone = browser.request(
        "DELETE", f"{url}/resolutions/{made.json()['id']}", json={}, headers=tenant.v2_headers
    )
    assert undone.status_code == 200, undone.text
    reopened = browser.get(url, headers=tenant.v2_headers).json()["last_run"]
    assert reopened["oldest_unmatched"]["left"] == {"date": "2024-01-01", "rows": 1}
    assert (
        '<time datetime="2024-01-01">' in browser.get(f"/console/reconciliations/{created.id}").text
    )


def test_a_status_of_a_later_version_is_shown_not_dropped() -> None:
    counts = {"matched": 2, "unmatched_left": 1, "unmatched_right": 0, "on_hold": 3}
    assert match_statuses(counts) == [
        ("matched", 2),
        ("matched_with_difference", 0),
        ("suggested", 0),
        ("manual", 0),
        ("on_hold", 3),
    ]


@contextmanager
def signed_in_as(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, role: str
) -> Iterator[httpx.Client]:
    """Another client of the same server, signed in to the console with `role`."""
    with httpx.Client(base_url=api.base_url, timeout=30, follow_redirects=False) as client:
        name = make_user(runtime, tenant.workspace_id, role).name
        assert sign_in(client, name).status_code == 303
        yield client


def last_action(api: httpx.Client, tenant: Tenant, reconciliation_id: int) -> dict[str, Any]:
    url = f"/api/v2/reconciliations/{reconciliation_id}/actions"
    taken: list[dict[str, Any]] = api.get(url, headers=tenant.v2_headers).json()["data"]
    return taken[-1]


def test_run_now_is_for_admins_and_kept_in_the_history_with_their_name(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    url = f"/console/reconciliations/{reconciliation_id}/run"
    assert "Run now" not in browser.get(f"/console/reconciliations/{reconciliation_id}").text
    assert browser.post(url, headers=SAME_ORIGIN).status_code == 403
    with signed_in_as(browser, runtime, tenant, "analyst") as analyst:
        assert analyst.post(url, headers=SAME_ORIGIN).status_code == 403
    with signed_in_as(browser, runtime, tenant, "admin") as admin:
        asked = admin.post(url, headers=SAME_ORIGIN)
        assert asked.status_code == 303
        assert (
            asked.headers["location"] == f"/console/reconciliations/{reconciliation_id}?done=queued"
        )
        page = admin.get(asked.headers["location"]).text
        name = re.search(r'<div class="who">\s*<span>([^ ]+) \(', page)
    assert name is not None
    assert 'role="status">Run queued' in page
    assert '<span class="status-queued">queued</span>' in page
    shown = browser.get(
        f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers
    ).json()
    assert shown["state"] == "queued"
    run = last_action(browser, tenant, reconciliation_id)
    assert (run["kind"], run["actor"], run["left_rows"], run["match_id"]) == (
        "run",
        name.group(1),
        [],
        None,
    )


def test_the_definition_is_shown_readably(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    shown = browser.get(
        f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers
    ).json()["definition"]
    html = browser.get(f"/console/reconciliations/{reconciliation_id}").text
    for index, each in enumerate(shown["passes"], start=1):
        assert f"<h3>Pass {index}: {each['name']}</h3>" in html
        assert f'<dd class="num">{each["amount_tolerance"]}</dd>' in html
    assert (
        "<code>bank.reference</code> = <code>ledger.reference</code> after trim, casefold" in html
    )
    assert "none: amount and date only" in html
    assert "suggested: an analyst confirms or rejects each" in html
    assert "one bank row to several ledger rows" in html
    assert "<code>bank_fee</code>, <code>timing</code>" in html
    assert "<td><code>txn_date</code></td>" in html
    assert "the ledger date from 3 days before to 3 days after the bank date" in html
    assert '<td>bank statement <span class="muted">(' in html
    assert "Edit as JSON" not in html  # a viewer reads it; only an admin edits it


def test_an_admin_edits_the_definition_as_json_each_problem_by_its_field(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """A negative tolerance and a missing field: the API's status and field paths, each
    problem a list item the textarea is described by, the JSON kept; a valid edit saved
    and kept in the history with the admin's name; a definition changed meanwhile
    through the API is a 409, and a second Save replaces it."""
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    api_url = f"/api/v2/reconciliations/{reconciliation_id}"
    page_url = f"/console/reconciliations/{reconciliation_id}"
    shown = browser.get(api_url, headers=tenant.v2_headers).json()["definition"]
    with signed_in_as(browser, runtime, tenant, "admin") as admin:
        html = admin.get(page_url).text
        base = re.search(r'name="base" value="([0-9a-f]{64})"', html)
        assert base is not None
        negative = copy.deepcopy(shown)
        negative["passes"][1]["amount_tolerance"] = "-0.05"
        for body in (negative, {k: v for k, v in shown.items() if k != "passes"}):
            through_api = browser.put(api_url, json=body, headers=tenant.v2_headers)
            text = json.dumps(body, indent=2)
            refused = admin.post(
                page_url, data={"definition": text, "base": base.group(1)}, headers=SAME_ORIGIN
            )
            assert refused.status_code == through_api.status_code
            assert refused.status_code in (400, 422)
            problems = re.findall(
                r'<li id="(definition-problem-\d+)"><code>([^<]+)</code>:',
                refused.text,
            )
            fields = [e["field"] for e in through_api.json()["errors"]]
            if body is negative:
                assert fields == ["passes[1].amount_tolerance"]
            assert [field for _, field in problems] == fields
            described = re.search(r'aria-describedby="definition-hint ([^"]+)"', refused.text)
            assert described is not None
            assert described.group(1).split() == [name for name, _ in problems]
            assert 'aria-invalid="true"' in refused.text
            assert str(html_escape(text)) in refused.text  # kept as typed
        edited = {**shown, "name": "Bank vs ledger, edited"}
        saved = admin.post(
            page_url,
            data={"definition": json.dumps(edited), "base": base.group(1)},
            headers=SAME_ORIGIN,
        )
        assert saved.status_code == 303
        assert saved.headers["location"] == f"{page_url}?done=saved"
        assert "<h1>Bank vs ledger, edited</h1>" in admin.get(saved.headers["location"]).text
        defined = last_action(browser, tenant, reconciliation_id)
        assert defined["kind"] == "define"
        assert defined["actor"] is not None
        assert not defined["actor"].startswith("api key")
        # changed meanwhile through the API: the page's base is stale
        stale = re.search(r'name="base" value="([0-9a-f]{64})"', admin.get(page_url).text)
        assert stale is not None
        theirs = {**edited, "name": "Bank vs ledger, theirs"}
        assert browser.put(api_url, json=theirs, headers=tenant.v2_headers).status_code == 200
        mine = json.dumps({**edited, "name": "Bank vs ledger, mine"})
        conflict = admin.post(
            page_url, data={"definition": mine, "base": stale.group(1)}, headers=SAME_ORIGIN
        )
        assert conflict.status_code == 409
        assert "changed since you opened this page" in conflict.text
        assert "<h1>Bank vs ledger, theirs</h1>" in conflict.text
        fresh = re.search(r'name="base" value="([0-9a-f]{64})"', conflict.text)
        assert fresh is not None
        again = admin.post(
            page_url, data={"definition": mine, "base": fresh.group(1)}, headers=SAME_ORIGIN
        )
        assert again.status_code == 303
    shown_now = browser.get(api_url, headers=tenant.v2_headers).json()
    assert shown_now["name"] == "Bank vs ledger, mine"
    with signed_in_as(browser, runtime, tenant, "analyst") as analyst:
        forged = analyst.post(
            page_url, data={"definition": mine, "base": fresh.group(1)}, headers=SAME_ORIGIN
        )
        assert forged.status_code == 403


def test_a_definition_that_is_not_json_says_where(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, _, _ = reconciled(runtime, tenant)
    page_url = f"/console/reconciliations/{reconciliation_id}"
    with signed_in_as(browser, runtime, tenant, "admin") as admin:
        base = re.search(r'name="base" value="([0-9a-f]{64})"', admin.get(page_url).text)
        assert base is not None
        refused = admin.post(
            page_url, data={"definition": '{"name": ', "base": base.group(1)}, headers=SAME_ORIGIN
        )
    assert refused.status_code == 422
    assert 'role="alert"' in refused.text
    assert re.search(
        r'"definition-problem-1">not JSON: [^<]+\(line 1, column \d+\)</li>', refused.text
    )
