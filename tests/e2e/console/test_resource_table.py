"""The resource table in a real browser (Debian's chromium through Playwright) against a
real `tally serve`, both backends: sorting by a header, a filter added, columns chosen,
paging, the back button, "Export CSV" downloaded with exact values, a hostile cell shown
as text, and axe-core on the screen. The screenshot for docs/console.md is taken here."""

from __future__ import annotations

import csv
import io
import os
import re
from decimal import Decimal
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.databases import BACKENDS
from support.factories import Tenant, make_source

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them
DASH = "\u2013"  # the en dash of "rows X-Y of N"
HOSTILE = "<script>alert(1)</script>"
COUNTERPARTIES = ("Acme Ltd", "Harbor Dairy S.A.", "Northwind GmbH", HOSTILE)


def statement(rows: int) -> str:
    """A bank statement: amounts with cents (some negative, one missing), dates, and a
    counterparty that is markup."""
    lines = ["booked_on,reference,amount,currency,counterparty,cleared"]
    for n in range(1, rows + 1):
        amount = "" if n == 7 else f"{(n * 379) % 2000 - 600}.{n * 13 % 100:02d}"
        lines.append(
            f"2026-11-{n % 28 + 1:02d},INV-{1000 + n},{amount},EUR,"
            f"{COUNTERPARTIES[n % 4]},{'true' if n % 3 else 'false'}"
        )
    return "\n".join(lines) + "\n"


def amounts(rows: int, *, cleared: bool | None = None) -> list[str]:
    """The statement's amounts as text, highest first (what `-amount` shows)."""
    found = []
    for n in range(1, rows + 1):
        if n != 7 and cleared in (None, bool(n % 3)):
            found.append(f"{(n * 379) % 2000 - 600}.{n * 13 % 100:02d}")
    return sorted(found, key=Decimal, reverse=True)


def open_table(page: Page, site: Site, tenant: Tenant, rows: int = 120) -> int:
    source = make_source(site.runtime.engine, tenant, statement(rows), name="Bank statement (EUR)")
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "viewer").name)
    page.goto(f"/console/resources/{source.id}")
    return source.id


def column(page: Page, name: str) -> list[str]:
    """The texts of one column's cells, top to bottom."""
    headers = page.locator("table.rows thead th").all_inner_texts()
    index = [h.strip(" ▲▼") for h in headers].index(name) + 1
    return page.locator(f"table.rows tbody tr td:nth-child({index})").all_inner_texts()


def test_sort_filter_columns_pages_and_back(page: Page, site: Site, tenant: Tenant) -> None:
    source_id = open_table(page, site, tenant)
    expect(page.get_by_text(f"rows 1{DASH}50 of 120")).to_have_count(2)  # caption and pager
    page.get_by_role("link", name="amount", exact=True).click()
    header = page.get_by_role("columnheader", name="amount")
    expect(header).to_have_attribute("aria-sort", "ascending")
    expect(page).to_have_url(re.compile(r"\?ordering=amount$"))
    statement_amounts = amounts(120)
    shown = column(page, "amount")
    assert shown[0] == "null"  # missing values first, ascending, as the Data API
    assert shown[1:50] == statement_amounts[::-1][:49]  # the digits as stored
    header.get_by_role("link").click()
    expect(header).to_have_attribute("aria-sort", "descending")
    assert column(page, "amount") == statement_amounts[:50]

    page.get_by_label("Column", exact=True).select_option("amount")
    page.get_by_label("Operator").select_option(label="≥")
    page.get_by_role("textbox", name="Value").fill("1000")
    page.get_by_role("button", name="Add filter").click()
    expect(page).to_have_url(re.compile(r"\?amount__gte=1000&ordering=-amount$"))
    filtered = column(page, "amount")
    assert filtered == sorted(filtered, key=Decimal, reverse=True)
    assert all(Decimal(a) >= 1000 for a in filtered)
    total = len(filtered)
    expect(page.get_by_text(f"rows 1{DASH}{total} of {total}").first).to_be_visible()

    page.get_by_text("Columns", exact=True).click()
    for name in ("booked_on", "currency", "cleared"):
        page.get_by_label(name, exact=True).uncheck()
    page.get_by_role("button", name="Show these columns").click()
    expect(page).to_have_url(re.compile(r"fields=reference%2Camount%2Ccounterparty"))
    assert [h.strip(" ▲▼") for h in page.locator("table.rows thead th").all_inner_texts()] == [
        "reference",
        "amount",
        "counterparty",
    ]
    page.go_back()
    expect(page).to_have_url(re.compile(r"\?amount__gte=1000&ordering=-amount$"))
    expect(page.locator("table.rows thead th")).to_have_count(6)
    page.get_by_role("link", name="Remove the filter amount__gte=1000").click()
    page.get_by_label("Rows per page").select_option("25")
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_text(f"rows 1{DASH}25 of 120, page 1 of 5")).to_be_visible()
    page.get_by_role("link", name="Next").click()
    expect(page.get_by_text(f"rows 26{DASH}50 of 120, page 2 of 5")).to_be_visible()
    expect(page).to_have_url(
        re.compile(rf"/console/resources/{source_id}\?ordering=-amount&page=2&page_size=25$")
    )
    page.go_back()
    expect(page.get_by_text(f"rows 1{DASH}25 of 120, page 1 of 5")).to_be_visible()
    page.go_forward()
    expect(page.get_by_text(f"rows 26{DASH}50 of 120, page 2 of 5")).to_be_visible()


def test_export_csv_downloads_the_whole_view_exactly(
    page: Page, site: Site, tenant: Tenant, tmp_path: Path
) -> None:
    source_id = open_table(page, site, tenant)
    page.goto(f"/console/resources/{source_id}?cleared=true&ordering=-amount&page_size=25")
    with page.expect_download() as started:
        page.get_by_role("link", name="Export CSV").click()
    download = started.value
    assert download.suggested_filename == "Bank statement (EUR).csv"  # filename*
    saved = tmp_path / "export.csv"
    download.save_as(saved)
    header, *rows = list(csv.reader(io.StringIO(saved.read_text("utf-8"), newline="")))
    assert header == ["booked_on", "reference", "amount", "currency", "counterparty", "cleared"]
    assert len(rows) == 80  # every row of the view, not the page's 25
    assert {row[5] for row in rows} == {"true"}
    assert [row[2] for row in rows] == [*amounts(120, cleared=True), ""]  # missing: last
    assert HOSTILE in {row[4] for row in rows}


def test_a_hostile_cell_is_text_and_the_screen_passes_axe(
    page: Page, site: Site, tenant: Tenant, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    open_table(page, site, tenant, rows=40)
    expect(page.get_by_role("cell", name=HOSTILE).first).to_be_visible()
    assert page.locator("main script, main img").count() == 0
    assert serious_violations(page) == []
    page.get_by_label("Column", exact=True).select_option("amount")
    page.get_by_role("textbox", name="Value").fill("ten")
    page.get_by_role("button", name="Add filter").click()
    expect(page.get_by_role("alert")).to_have_text(
        "The requested filters or ordering could not be applied."
    )
    assert serious_violations(page) == []
    page.get_by_role("link", name="Remove the filter amount=ten").click()
    page.goto(page.url + "?counterparty__in=Acme%20Ltd,Northwind%20GmbH&ordering=-amount")
    page.get_by_text("Columns", exact=True).click()
    assert serious_violations(page) == []
    if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1100, "height": 900})
        page.screenshot(path=folder / "resource-table.png", full_page=True)
