"""A reconciliation's page in a real browser (Debian's chromium) against a real `tally
serve`, both backends: its figures are the API's, each status links to its rows, the
overview links to it, axe finds nothing serious; photographed for docs/console.md."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.console_reconciliations import month_of_payments
from support.databases import BACKENDS
from support.factories import Tenant, make_tenant

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them
KEY = [{"left": "reference", "right": "reference"}]
PASSES = [
    {"name": "same reference", "type": "one_to_one", "keys": KEY},
    {
        "name": "reference, small differences",
        "type": "one_to_one",
        "keys": KEY,
        "amount_tolerance": "0.05",
        "date_window": [-3, 3],
    },
    {"name": "amount and date", "type": "one_to_one", "keys": [], "auto_confirm": False},
]


def reconciliation(site: Site, tenant: Tenant) -> tuple[int, int]:
    """Bank vs ledger, run: matched, with a difference, suggested and unmatched rows."""
    return month_of_payments(site.runtime, tenant, PASSES)


def test_the_page_shows_the_apis_figures_and_links_each_status_to_its_rows(
    page: Page, site: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenant = make_tenant(site.runtime.engine)
    reconciliation_id, output_id = reconciliation(site, tenant)
    shown = site.runtime.reconciliations.get(
        workspace_id=tenant.workspace_id, derived_id=reconciliation_id
    )
    assert shown.last_run is not None
    counts, amounts = shown.last_run["counts"], shown.last_run["amounts"]
    assert (counts["matched"], counts["matched_with_difference"], counts["suggested"]) == (2, 1, 1)
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "analyst").name)
    figures = page.get_by_role("table", name="Reconciliations")  # on the overview
    figures.get_by_role("link", name="Bank vs ledger", exact=True).click()
    expect(page.get_by_role("heading", name="Bank vs ledger", level=1)).to_be_visible()
    by_status = page.get_by_role("table", name="By status")
    for status in ("matched", "matched_with_difference", "suggested", "manual"):
        row = by_status.get_by_role("row").filter(
            has=page.get_by_role("rowheader", name=status, exact=True)
        )
        expect(row).to_contain_text(f"{counts[status]} match")
        link = row.get_by_role("link", name=f"{status} rows")
        expect(link).to_have_attribute("href", f"/console/resources/{output_id}?status={status}")
    unmatched = by_status.get_by_role("row").filter(has_text="unmatched rows")
    expect(unmatched).to_contain_text(f"{counts['unmatched_left']} bank rows")  # 2
    expect(unmatched).to_contain_text(f"{counts['unmatched_right']} ledger row")  # 1
    by_side = page.get_by_role("table", name="By side")
    for side in ("left", "right"):
        row = by_side.get_by_role("row").filter(has_text=f"({side})")
        expect(row).to_contain_text(amounts[side]["unmatched"])
        expect(row).to_contain_text(f"{shown.last_run['oldest_unmatched'][side]['date']}")
    # each side's amounts: in any match, per match status, unmatched, resolved
    amounts_table = page.get_by_role("table", name="Amounts")
    for side, name in (("left", "bank"), ("right", "ledger")):
        row = amounts_table.get_by_role("row").filter(
            has=page.get_by_role("rowheader", name=name, exact=True)
        )
        totals = amounts[side]
        split = totals["matched_by_status"]
        expect(row.get_by_role("cell")).to_have_text(
            [
                totals["matched"],
                *(split[s] for s in ("matched", "matched_with_difference", "suggested", "manual")),
                totals["unmatched"],
                totals["resolved"],
                re.compile(r"\d+\.\d %"),
            ]
        )
    expect(page.get_by_role("link", name="Rows", exact=True)).to_have_attribute(
        "href", f"/console/resources/{output_id}"
    )
    expect(page.get_by_role("link", name="Bank statement (EUR)", exact=True)).to_be_visible()
    assert serious_violations(page) == []
    if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1100, "height": 640})
        page.screenshot(path=folder / "reconciliation.png", full_page=True)


def test_another_workspaces_reconciliation_is_the_missing_page(page: Page, site: Site) -> None:
    theirs, _ = reconciliation(site, make_tenant(site.runtime.engine))
    tenant = make_tenant(site.runtime.engine)
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "viewer").name)
    answers = []
    for reconciliation_id in (theirs, 2_000_000_000):
        response = page.goto(f"/console/reconciliations/{reconciliation_id}")
        assert response is not None
        answers.append((response.status, page.locator("main").inner_text()))
    assert answers[0] == answers[1]
    assert answers[0][0] == 404
    assert serious_violations(page) == []
