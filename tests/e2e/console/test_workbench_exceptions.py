"""The workbench's Exceptions view in a real browser (Debian's chromium) against a real
`tally serve`, both backends: both sides with ages and reasons; the Selection's sums and
difference live and exact (0.10 + 0.20 = 0.30; 12345678901234567.89); Match at zero, with
a difference once a note is given (the API's figures after); two analysts on the same
rows (one 409 naming the row); Resolve; the candidates panel; sort and filter in the
URL with Back; a whole session by keyboard alone; a viewer's forged POST; axe on each;
photographed for docs/console.md."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.databases import BACKENDS
from support.exceptions import reconciled
from support.factories import Tenant

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them


def open_view(page: Page, site: Site, tenant: Tenant, role: str = "analyst") -> int:
    """The pair reconciled, a user of `role` signed in, the Exceptions view open."""
    reconciliation_id, _ = reconciled(site.runtime, tenant)
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, role).name)
    page.goto(f"/console/reconciliations/{reconciliation_id}")
    page.get_by_role("navigation", name="Workbench").get_by_role("link", name="Exceptions").click()
    expect(page.get_by_role("table", name=re.compile(r"^bank:"))).to_be_visible()
    return reconciliation_id


def selection_text(page: Page) -> str:
    return page.get_by_role("region", name="Selection").inner_text()


def last_run(site: Site, tenant: Tenant, reconciliation_id: int) -> dict[str, object]:
    shown = site.runtime.reconciliations.get(
        workspace_id=tenant.workspace_id, derived_id=reconciliation_id
    )
    assert shown.last_run is not None
    return shown.last_run


def test_side_by_side_with_ages_and_reasons_and_a_live_exact_selection_matched(
    page: Page, site: Site, tenant: Tenant, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    reconciliation_id = open_view(page, site, tenant)
    bank = page.get_by_role("table", name=re.compile(r"^bank:"))
    ledger = page.get_by_role("table", name=re.compile(r"^ledger:"))
    expect(bank).to_have_accessible_name("bank: rows 1\u20135 of 5")
    expect(ledger).to_have_accessible_name("ledger: rows 1\u20134 of 4")
    oldest = bank.get_by_role("row").nth(1)  # oldest first: B-4, 2024-01-01
    age = (dt.datetime.now(dt.UTC).date() - dt.date(2024, 1, 1)).days
    expect(oldest).to_contain_text("B-4")
    expect(oldest).to_contain_text(str(age))
    expect(oldest).to_contain_text("amount differs by 0.05, tolerance 0.01")  # its reason
    for name in ("bank row 2", "bank row 3", "ledger row 2"):
        page.get_by_role("checkbox", name=name, exact=True).check()
    expect(page.get_by_role("region", name="Selection")).to_contain_text("bank\n2 rows, sum 0.30")
    expect(page.get_by_role("region", name="Selection")).to_contain_text("Difference")
    assert "0.30000000000000004" not in selection_text(page)
    page.get_by_role("checkbox", name="bank row 4", exact=True).check()
    expect(page.get_by_role("region", name="Selection")).to_contain_text("sum 12345678901234568.19")
    page.get_by_role("checkbox", name="ledger row 3", exact=True).check()
    region = page.get_by_role("region", name="Selection")
    expect(region.locator("[data-difference]")).to_have_text("0.00")
    assert serious_violations(page) == []
    if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1700, "height": 900})
        page.screenshot(path=folder / "workbench-exceptions.png", full_page=True)
    page.get_by_role("button", name="Match").click()
    expect(page.get_by_role("status")).to_have_text(
        "Matched bank rows 2, 3, 4 with ledger rows 2, 3 (match 2)."
    )
    expect(bank).to_have_accessible_name("bank: rows 1\u20132 of 2")
    expect(page.get_by_role("checkbox", name="ledger row 3", exact=True)).to_have_count(0)
    counts = last_run(site, tenant, reconciliation_id)["counts"]
    assert isinstance(counts, dict)
    assert (counts["manual"], counts["unmatched_left"], counts["unmatched_right"]) == (1, 2, 2)


def test_a_difference_needs_a_note_then_the_match_keeps_it(
    page: Page, site: Site, tenant: Tenant
) -> None:
    reconciliation_id = open_view(page, site, tenant)
    page.get_by_role("checkbox", name="bank row 5", exact=True).check()
    page.get_by_role("checkbox", name="ledger row 4", exact=True).check()
    region = page.get_by_role("region", name="Selection")
    expect(region.locator("[data-difference]")).to_have_text("-12.25")
    page.get_by_role("button", name="Match").click()
    expect(page.get_by_role("alert")).to_contain_text("the rows differ by -12.25")
    note = page.get_by_role("textbox", name=re.compile("^Note"))
    expect(note).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("checkbox", name="bank row 5", exact=True)).to_be_checked()
    expect(region.locator("[data-difference]")).to_have_text("-12.25")
    note.fill("refund booked net of the fee")
    page.get_by_role("button", name="Match").click()
    expect(page.get_by_role("status")).to_contain_text("Matched bank row 5 with ledger row 4")
    assert serious_violations(page) == []
    site.runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
    output_id = site.runtime.reconciliations.get(
        workspace_id=tenant.workspace_id, derived_id=reconciliation_id
    ).resource_id
    rows = page.request.get(
        f"/api/v1/resources/{output_id}/data?status=manual", headers=tenant.headers
    )
    assert {r["difference"] for r in rows.json()["data"]} == {-12.25}  # (JSON: a number)
    assert '"difference":-12.25' in rows.text().replace(" ", "")


def test_two_analysts_on_the_same_rows_one_wins_the_other_is_told_which_row(
    page: Page, context: BrowserContext, site: Site, tenant: Tenant
) -> None:
    reconciliation_id = open_view(page, site, tenant)
    other_context = context.browser.new_context(base_url=site.url)  # type: ignore[union-attr]
    try:
        other = other_context.new_page()
        sign_in_page(other, make_user(site.runtime, tenant.workspace_id, "analyst").name)
        other.goto(f"/console/reconciliations/{reconciliation_id}/exceptions")
        for each in (page, other):
            for name in ("bank row 2", "bank row 3", "ledger row 2"):
                each.get_by_role("checkbox", name=name, exact=True).check()
        page.get_by_role("button", name="Match").click()
        expect(page.get_by_role("status")).to_contain_text("Matched bank rows 2, 3")
        with other.expect_response(lambda r: r.request.method == "POST") as answer:
            other.get_by_role("button", name="Match").click()
        assert answer.value.status == 409
        expect(other.get_by_role("alert")).to_contain_text(
            "bank row 2 is already in manual match 2"
        )
        assert serious_violations(other) == []
    finally:
        other_context.close()
    counts = last_run(site, tenant, reconciliation_id)["counts"]
    assert isinstance(counts, dict)
    assert counts["manual"] == 1


def test_resolve_a_fee_with_a_reason_and_a_note(page: Page, site: Site, tenant: Tenant) -> None:
    reconciliation_id = open_view(page, site, tenant)
    page.get_by_role("checkbox", name="bank row 6", exact=True).check()
    page.get_by_role("checkbox", name="ledger row 4", exact=True).check()
    page.get_by_label("Reason code").select_option("bank_fee")
    page.get_by_role("button", name="Resolve").click()
    expect(page.get_by_role("alert")).to_contain_text("one side only")
    page.get_by_role("checkbox", name="ledger row 4", exact=True).uncheck()
    page.get_by_role("textbox", name=re.compile("^Note")).fill("November's account fee")
    page.get_by_role("button", name="Resolve").click()
    expect(page.get_by_role("status")).to_contain_text("Resolved bank row 6")
    expect(page.get_by_role("checkbox", name="bank row 6", exact=True)).to_have_count(0)
    counts = last_run(site, tenant, reconciliation_id)["counts"]
    assert isinstance(counts, dict)
    assert counts["resolved_left"] == 1
    assert serious_violations(page) == []


def test_candidates_explained_and_ticked_into_the_selection_sort_and_filter_in_the_url(
    page: Page, site: Site, tenant: Tenant
) -> None:
    open_view(page, site, tenant)
    page.get_by_role("link", name="Candidates of bank row 5").click()
    expect(page).to_have_url(re.compile(r"candidates=left%3A5|candidates=left:5"))
    panel = page.get_by_role("region", name="Candidates of bank row 5")
    expect(panel).to_contain_text("reference, small differences")
    expect(panel).to_contain_text("failed")
    panel.get_by_role("checkbox", name="ledger row 5", exact=True).first.check()
    expect(page.get_by_role("checkbox", name="ledger row 5", exact=True).first).to_be_checked()
    expect(page.get_by_role("region", name="Selection")).to_contain_text("1 row, sum -7.20")
    assert serious_violations(page) == []
    page.get_by_role("table", name=re.compile(r"^bank:")).get_by_role("link", name="Amount").click()
    expect(page).to_have_url(re.compile("left_sort=amount"))
    expect(page).to_have_url(re.compile("candidates="))  # the panel kept
    page.get_by_label("reference contains").first.fill("B-3")
    page.get_by_role("button", name="Filter").first.click()
    expect(page.get_by_role("table", name=re.compile(r"^bank:"))).to_have_accessible_name(
        "bank: rows 1\u20131 of 1"
    )
    expect(page).to_have_url(re.compile("left_text=B-3"))
    page.go_back()
    expect(page.get_by_role("table", name=re.compile(r"^bank:"))).to_have_accessible_name(
        "bank: rows 1\u20135 of 5"
    )


def test_a_whole_session_with_the_keyboard_alone(page: Page, site: Site, tenant: Tenant) -> None:
    open_view(page, site, tenant)
    keyboard = page.keyboard

    def focused() -> str:
        return str(page.evaluate("document.activeElement.getAttribute('aria-label') || ''"))

    for _ in range(80):  # Tab until the bank table's first row
        keyboard.press("Tab")
        if focused().startswith("bank row"):
            break
    assert focused() == "bank row 5"  # the oldest first
    keyboard.press("ArrowDown")
    assert focused() == "bank row 2"
    keyboard.press("Space")
    keyboard.press("j")
    assert focused() == "bank row 3"
    keyboard.press("Space")
    for _ in range(40):  # on to the ledger's table
        keyboard.press("Tab")
        if focused().startswith("ledger row"):
            break
    while focused() != "ledger row 2":
        keyboard.press("ArrowDown")
    keyboard.press("Space")
    expect(page.get_by_role("region", name="Selection").locator("[data-difference]")).to_have_text(
        "0.00"
    )
    keyboard.press("m")
    expect(page.get_by_role("status")).to_contain_text("Matched bank rows 2, 3 with ledger row 2")
    focus_ring = page.evaluate(
        "() => { const b = document.querySelector('input.pick'); b.focus(); "
        "return getComputedStyle(b).outlineStyle; }"
    )
    assert focus_ring != "none"


def test_a_viewer_sees_no_actions_and_a_forged_post_is_403(
    page: Page, site: Site, tenant: Tenant
) -> None:
    reconciliation_id = open_view(page, site, tenant, role="viewer")
    expect(page.get_by_role("button", name="Match")).to_have_count(0)
    page.get_by_role("checkbox", name="bank row 2", exact=True).check()
    expect(page.get_by_role("region", name="Selection")).to_contain_text("1 row, sum 0.10")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.evaluate(
            """() => {
                const form = document.getElementById("selection");
                for (const [name, value] of [["action", "match"], ["right", "2"]]) {
                    const field = document.createElement("input");
                    field.type = "hidden"; field.name = name; field.value = value;
                    form.append(field);
                }
                form.submit();
            }"""
        )
    assert answer.value.status == 403
    counts = last_run(site, tenant, reconciliation_id)["counts"]
    assert isinstance(counts, dict)
    assert counts["manual"] == 0
    assert serious_violations(page) == []
