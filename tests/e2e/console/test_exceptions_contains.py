"""The Exceptions view's text filter in a real browser, both backends: an analyst types
part of a reference in any case and the side shows every open row containing it (the
other side untouched), the filter lives in the URL (Back returns to the last search),
Clear brings every row back; axe on each; photographed for docs/console.md."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.databases import BACKENDS
from support.exceptions import SEARCHABLE_BANK_CSV, reconciled
from support.factories import Tenant

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them


def search(page: Page, text: str) -> None:
    """Type `text` into the bank's reference box and press Enter."""
    box = page.get_by_role("group", name="Filter bank").get_by_label("reference contains")
    box.fill(text)
    box.press("Enter")


def test_typing_part_of_a_reference_filters_the_side(
    page: Page, site: Site, tenant: Tenant, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    reconciliation_id, _ = reconciled(site.runtime, tenant, bank=SEARCHABLE_BANK_CSV)
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "analyst").name)
    page.goto(f"/console/reconciliations/{reconciliation_id}/exceptions")
    bank = page.get_by_role("table", name=re.compile(r"^bank:"))
    ledger = page.get_by_role("table", name=re.compile(r"^ledger:"))
    expect(bank).to_have_accessible_name("bank: rows 1\u201315 of 15")

    search(page, "inv-20")
    expect(page).to_have_url(re.compile(r"left_text=inv-20"))
    expect(bank).to_have_accessible_name("bank: rows 1\u20132 of 2")
    expect(bank).to_contain_text("INV-2024-001")
    expect(bank).to_contain_text("inv-2031")
    expect(bank).not_to_contain_text("INV-19")
    expect(ledger).to_have_accessible_name("ledger: rows 1\u20134 of 4")  # untouched
    assert serious_violations(page) == []
    if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1700, "height": 900})
        page.screenshot(path=folder / "workbench-exceptions-contains.png", full_page=True)

    search(page, "MÜLLER")
    expect(bank).to_have_accessible_name("bank: rows 1\u20131 of 1")
    expect(bank).to_contain_text("Müller GmbH")
    search(page, "50%_")  # wildcards are text: not "50xyoff"
    expect(bank).to_have_accessible_name("bank: rows 1\u20131 of 1")
    expect(bank).to_contain_text("50%_off")

    page.go_back()
    expect(bank).to_have_accessible_name("bank: rows 1\u20131 of 1")
    expect(bank).to_contain_text("Müller GmbH")
    page.go_back()
    expect(bank).to_have_accessible_name("bank: rows 1\u20132 of 2")
    page.get_by_role("link", name="Clear the filters of bank").click()
    expect(bank).to_have_accessible_name("bank: rows 1\u201315 of 15")
    assert serious_violations(page) == []
