"""The workbench's Suggestions, Matches and Resolved views in a real browser (Debian's
chromium) against a real `tally serve` with its worker, both backends: suggestions with
the Data API's reason and difference, confirmed and rejected one by one and several at
once, by keyboard; a manual and an automatic match undone (and what GET .../actions
says after); a resolution reopened, its rows unmatched at once; a 409 when two analysts
act on one match; a viewer who sees and cannot act; axe on each view; photographed for
docs/console.md."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from e2e.console.test_console_browser import post_from_devtools
from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.databases import BACKENDS
from support.factories import Tenant
from support.waiting import eventually
from support.workbench import reconciled
from tally.core.reconciliation import SideName

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them
RUN_SECONDS = 60  # the worker's run after an action: waited for, never timed


def data_rows(site: Site, tenant: Tenant, output_id: int, **filters: str) -> list[Any]:
    """The Data API's rows of the output, numbers as their exact text."""
    answer = httpx.get(
        f"{site.url}/api/v1/resources/{output_id}/data",
        headers=tenant.headers,
        params={"page_size": "1000", **filters},
    )
    assert answer.status_code == 200, answer.text
    rows: list[Any] = json.loads(answer.text, parse_float=str, parse_int=str)["data"]
    return rows


def actions(site: Site, tenant: Tenant, reconciliation_id: int) -> list[Any]:
    answer = httpx.get(
        f"{site.url}/api/v2/reconciliations/{reconciliation_id}/actions",
        headers=tenant.v2_headers,
    )
    assert answer.status_code == 200
    taken: list[Any] = answer.json()["data"]
    return taken


def suggested(site: Site, tenant: Tenant, output_id: int) -> list[int]:
    rows = data_rows(site, tenant, output_id, status="suggested")
    return sorted({int(r["match_id"]) for r in rows})


def settled(site: Site, tenant: Tenant, reconciliation_id: int) -> bool:
    """No run due or running: the output shows every action taken."""
    shown = site.runtime.reconciliations.get(
        workspace_id=tenant.workspace_id, derived_id=reconciliation_id
    )
    return shown.state == "idle"


def photograph(page: Page, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> None:
    """On the first backend only, into TALLY_SCREENSHOTS when set."""
    if request.node.callspec.params.get("site", BACKENDS[0]) != BACKENDS[0]:
        return
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1100, "height": 700})
    page.screenshot(path=folder / name, full_page=True)


def test_suggestions_confirmed_and_rejected_each_and_several_by_keyboard(
    page: Page, site: Site, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    reconciliation_id, output_id = reconciled(site.runtime, tenant)
    analyst = make_user(site.runtime, tenant.workspace_id, "analyst")
    sign_in_page(page, analyst.name)
    page.goto(f"/console/reconciliations/{reconciliation_id}")
    page.get_by_role("navigation", name="Workbench").get_by_role("link", name="Suggestions").click()
    expect(page.get_by_role("heading", name="Suggested matches")).to_be_visible()
    table = page.get_by_role("table", name="Suggested matches, each with its rows of both sides")
    rows = data_rows(site, tenant, output_id, status="suggested")
    for row in rows:
        group = table.locator(f"#match-{row['match_id']}")
        expect(group).to_contain_text(row["reason"])
        expect(group.locator(".match-head .num")).to_have_text(row["difference"])
        expect(group).to_contain_text(row["bank.amount"])
        expect(group).to_contain_text(row["ledger.amount"])
    expect(page.get_by_text("matches 1\u20133 of 3")).to_be_visible()
    assert serious_violations(page) == []
    photograph(page, request, tmp_path, "workbench-suggestions.png")
    one, two, three = suggested(site, tenant, output_id)
    # "Select all on this page" (the view's script) ticks and clears every box
    select_all = page.get_by_label("Select all on this page")
    select_all.check()
    for match_id in (one, two, three):
        expect(page.get_by_label(f"suggested match {match_id}")).to_be_checked()
    select_all.uncheck()
    expect(page.get_by_label(f"suggested match {one}")).not_to_be_checked()
    # confirm one, by keyboard
    page.get_by_role("button", name=f"Confirm match {one}").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Confirmed match {one}.")
    # reject another with a note, by keyboard
    page.get_by_label(f"Note for rejecting match {two} (optional)").fill("not the same payment")
    page.keyboard.press("Enter")  # the note's form is submitted
    expect(page.get_by_role("status")).to_contain_text(f"Rejected match {two}.")
    eventually(
        lambda: (
            settled(site, tenant, reconciliation_id)
            and suggested(site, tenant, output_id) == [three]
        ),
        timeout=RUN_SECONDS,
        what="the run after the confirmation and the rejection",
    )
    kinds = [
        (a["kind"], a["match_id"], a["actor"], a["note"])
        for a in actions(site, tenant, reconciliation_id)
    ]
    assert kinds == [
        ("confirm", one, analyst.name, None),
        ("reject", two, analyst.name, "not the same payment"),
    ]
    # several at once: the one left, selected with the space bar
    page.reload()
    box = page.get_by_label(f"suggested match {three}")
    box.focus()
    page.keyboard.press("Space")
    expect(box).to_be_checked()
    page.get_by_role("button", name="Confirm selected").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Confirmed match {three}.")
    assert actions(site, tenant, reconciliation_id)[-1]["match_id"] == three


def test_matches_undone_manual_dissolved_automatic_rejected(
    page: Page, site: Site, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    reconciliation_id, output_id = reconciled(site.runtime, tenant)
    manual = site.runtime.reconciliations.match(
        workspace_id=tenant.workspace_id,
        reconciliation_id=reconciliation_id,
        left_rows=[6, 7],
        right_rows=[6],
        note="fees against the credit",
        actor="alice",
    )
    eventually(
        lambda: settled(site, tenant, reconciliation_id), timeout=RUN_SECONDS, what="the run"
    )
    analyst = make_user(site.runtime, tenant.workspace_id, "analyst")
    sign_in_page(page, analyst.name)
    page.goto(f"/console/reconciliations/{reconciliation_id}/matches")
    table = page.get_by_role("table", name="Matches, each with its rows of both sides")
    every = data_rows(site, tenant, output_id, status__in="matched,matched_with_difference,manual")
    for row in every:
        group = table.locator(f"#match-{row['match_id']}")
        expect(group).to_contain_text(row["reason"])
        expect(group).to_contain_text(f"pass {row['pass']}")
        expect(group.locator(".match-head .num")).to_have_text(row["difference"])
    mine = table.locator(f"#match-{manual}")
    expect(mine).to_contain_text("Matched by hand by alice")
    expect(mine).to_contain_text("fees against the credit")
    expect(mine).to_contain_text("Undo dissolves this manual match")
    expect(table.locator("#match-1")).to_contain_text("Undo rejects this automatic match for good")
    assert serious_violations(page) == []
    photograph(page, request, tmp_path, "workbench-matches.png")
    # filters in the URL
    page.get_by_label("Status").select_option("manual")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"status=manual"))
    expect(page.get_by_text("matches 1\u20131 of 1")).to_be_visible()
    page.go_back()
    expect(
        page.get_by_text(f"matches 1\u2013{len({r['match_id'] for r in every})} of")
    ).to_be_visible()
    # dissolve the manual one, by keyboard, with a note
    page.get_by_label(f"Note for undoing match {manual} (optional)").fill("wrong fees")
    page.get_by_role("button", name=f"Dissolve match {manual}").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Dissolved manual match {manual}")
    # reject the automatic one for good
    page.get_by_label("Note for undoing match 1 (optional)").fill("duplicate booking")
    page.get_by_role("button", name="Reject match 1 for good").click()
    expect(page.get_by_role("status")).to_contain_text("Rejected match 1 for good")
    taken = actions(site, tenant, reconciliation_id)
    dissolved = next(a for a in taken if a["kind"] == "match")
    assert dissolved["undone_at"] is not None
    assert (dissolved["undo_actor"], dissolved["undo_note"]) == (analyst.name, "wrong fees")
    rejected = next(a for a in taken if a["kind"] == "reject")
    assert (rejected["actor"], rejected["note"], rejected["left_rows"]) == (
        analyst.name,
        "duplicate booking",
        [1],
    )
    eventually(
        lambda: (
            settled(site, tenant, reconciliation_id)
            and {
                r["status"]
                for r in data_rows(site, tenant, output_id, **{"bank._row__in": "1,6,7"})
            }
            == {"unmatched"}
        ),
        timeout=RUN_SECONDS,
        what="the run after the undos: the rows unmatched",
    )


def test_resolved_listed_and_reopened_the_rows_unmatched_at_once(
    page: Page, site: Site, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    reconciliation_id, output_id = reconciled(site.runtime, tenant)
    resolution = site.runtime.reconciliations.resolve(
        workspace_id=tenant.workspace_id,
        reconciliation_id=reconciliation_id,
        side=SideName.LEFT,
        rows=[6, 7],
        reason="bank_fee",
        note="November fees",
        actor="alice",
    )
    analyst = make_user(site.runtime, tenant.workspace_id, "analyst")
    sign_in_page(page, analyst.name)
    page.goto(f"/console/reconciliations/{reconciliation_id}")
    page.get_by_role("navigation", name="Workbench").get_by_role("link", name="Resolved").click()
    group = page.locator(f"#resolution-{resolution.id}")
    for row in data_rows(site, tenant, output_id, status="resolved"):
        expect(group).to_contain_text(row["bank.amount"])
    expect(group).to_contain_text("bank_fee")
    expect(group).to_contain_text("By alice")
    assert serious_violations(page) == []
    photograph(page, request, tmp_path, "workbench-resolved.png")
    page.get_by_label(f"Note for reopening resolution {resolution.id} (optional)").fill(
        "booked in December"
    )
    page.get_by_role("button", name=f"Reopen resolution {resolution.id}").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Reopened resolution {resolution.id}")
    # at once: the output shows the rows unmatched, whatever the worker does next
    statuses = {r["bank._row"]: r["status"] for r in data_rows(site, tenant, output_id)}
    assert (statuses["6"], statuses["7"]) == ("unmatched", "unmatched")
    reopened = page.get_by_role("table", name="Reopened resolutions, newest first")
    expect(reopened).to_contain_text("booked in December")
    expect(reopened).to_contain_text(analyst.name)
    expect(page.locator(f"#resolution-{resolution.id}")).to_have_count(0)
    assert serious_violations(page) == []


def test_two_analysts_confirm_one_match_the_second_sees_the_409(
    browser: Browser, site: Site, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(site.runtime, tenant)
    first, *_ = suggested(site, tenant, output_id)
    pages = []
    for _ in range(2):
        context = browser.new_context(base_url=site.url)
        opened = context.new_page()
        sign_in_page(opened, make_user(site.runtime, tenant.workspace_id, "analyst").name)
        opened.goto(f"/console/reconciliations/{reconciliation_id}/suggestions")
        pages.append(opened)
    try:
        pages[0].get_by_role("button", name=f"Confirm match {first}").click()
        expect(pages[0].get_by_role("status")).to_contain_text(f"Confirmed match {first}.")
        with pages[1].expect_response(lambda r: r.request.method == "POST") as answer:
            pages[1].get_by_role("button", name=f"Confirm match {first}").click()
        assert answer.value.status == 409
        alert = pages[1].get_by_role("alert")
        # the worker may have run the first confirmation already: either way a 409 naming it
        expect(alert).to_have_text(
            re.compile(
                rf"Match {first}: .*(already in manual match {first}|Match {first} is manual)"
            )
        )
        assert serious_violations(pages[1]) == []
    finally:
        for opened in pages:
            opened.context.close()
    assert [a["kind"] for a in actions(site, tenant, reconciliation_id)] == ["confirm"]


def test_a_viewer_sees_each_view_and_cannot_act(page: Page, site: Site, tenant: Tenant) -> None:
    reconciliation_id, output_id = reconciled(site.runtime, tenant)
    first, *_ = suggested(site, tenant, output_id)
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "viewer").name)
    base = f"/console/reconciliations/{reconciliation_id}"
    for view in ("suggestions", "matches", "resolved"):
        page.goto(f"{base}/{view}")
        expect(page.get_by_role("link", name="Export CSV")).to_be_visible()
        expect(
            page.get_by_role("button", name=re.compile("Confirm|Reject|Dissolve|Reopen"))
        ).to_have_count(0)
        assert serious_violations(page) == []
    page.goto(f"{base}/suggestions")
    expect(page.locator(f"#match-{first}")).to_be_visible()
    status, text = post_from_devtools(page, f"{base}/suggestions/{first}/confirm")
    assert status == 403
    assert "Not allowed" in text
    status, _ = post_from_devtools(page, f"{base}/matches/1/undo")
    assert status == 403
    assert actions(site, tenant, reconciliation_id) == []
