"""The transformation page in a real browser (Debian's chromium through Playwright)
against a real `tally serve` with its worker, one per backend for the module: the SQL
edited, previewed (columns and exact first rows; an error's line and column), saved by
an admin and run by the worker; a viewer's page without Save; axe clean throughout."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.databases import BACKENDS
from support.factories import Tenant, make_source
from support.waiting import eventually
from tally.services.transformations.service import Transformation

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them
PAYOUTS_CSV = (
    "payout_id,currency,amount,fee,status\n"
    "PO-1041,EUR,1250.00,12.500,settled\n"
    "PO-1042,EUR,-310.25,3.100,settled\n"
    "PO-1043,USD,99.99,0.995,void\n"
    "PO-1044,EUR,0.10,0.001,settled\n"
)
FIRST_SQL = "SELECT p.payout_id, p.amount FROM p WHERE p.status = 'settled'"
EDITED_SQL = (
    "SELECT p.payout_id, p.currency,\n"
    "       p.amount - p.fee AS net\n"
    "FROM p\n"
    "WHERE p.status = 'settled'"
)
RUN_SECONDS = 60  # a generous deadline for the worker's run, never an assertion


def defined(site: Site, tenant: Tenant) -> Transformation:
    """Payouts (a source) and a transformation over them, run once; and a second
    transformation reading its output (a reader to link to)."""
    payouts = make_source(site.runtime.engine, tenant, PAYOUTS_CSV, name="Stripe payouts")
    made = site.runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={"name": "Settled payouts", "inputs": {"p": payouts.id}, "sql": FIRST_SQL},
    )
    site.runtime.derived.run_now(made.id, kind="transformation", worker="test")
    site.runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={
            "name": "Large payouts",
            "inputs": {"settled": made.resource_id},
            "sql": "SELECT settled.payout_id FROM settled WHERE settled.amount > 1000",
        },
    )
    return made


def runs_table(page: Page) -> Locator:
    return page.get_by_role("table", name=re.compile("^Its last runs"))


def test_edit_preview_and_save_then_the_run_appears(
    page: Page, site: Site, tenant: Tenant, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    made = defined(site, tenant)
    admin = make_user(site.runtime, tenant.workspace_id, "admin")
    sign_in_page(page, admin.name)
    page.set_viewport_size({"width": 1100, "height": 900})
    page.goto(f"/console/transformations/{made.id}")
    expect(page.get_by_role("heading", name="Settled payouts")).to_be_visible()
    expect(page.get_by_role("link", name="Stripe payouts", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Large payouts", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Rows", exact=True)).to_have_attribute(
        "href", f"/console/resources/{made.resource_id}"
    )
    editor = page.get_by_label("SQL of Settled payouts")
    expect(editor).to_have_value(FIRST_SQL)
    assert serious_violations(page) == []

    editor.fill("SELECT p.payout_id,\n  p.nope\nFROM p")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("alert")).to_contain_text("unknown column 'nope' (line 2, column 3)")
    expect(page.locator("pre.sql-position")).to_have_text("  p.nope\n  ^")
    expect(editor).to_have_value("SELECT p.payout_id,\n  p.nope\nFROM p")  # kept to fix
    assert serious_violations(page) == []

    editor.fill(EDITED_SQL)
    editor.press("Tab")  # the keyboard leaves the editor: no focus trap
    expect(page.get_by_role("button", name="Preview")).to_be_focused()
    page.keyboard.press("Enter")
    preview = page.get_by_role("table", name=re.compile("^The first 3 rows"))
    expect(preview.get_by_role("columnheader")).to_have_text(
        ["payout_id text", "currency text", "net decimal"]
    )
    expect(preview.get_by_role("row").nth(1)).to_have_text(re.compile(r"PO-1041\s*EUR\s*1237\.500"))
    expect(preview.get_by_role("row").nth(3)).to_contain_text("0.099")
    expect(editor).to_have_value(EDITED_SQL)
    assert serious_violations(page) == []
    if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=folder / "transformation.png", full_page=True)

    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(re.compile(rf"/console/transformations/{made.id}\?saved=1$"))
    expect(page.get_by_role("status")).to_have_text("Saved. A run with the new SQL is queued.")
    expect(editor).to_have_value(EDITED_SQL)
    service, workspace_id = site.runtime.transformations, tenant.workspace_id

    def ran() -> bool:  # the worker ran the saved SQL, and nothing more is due
        shown = service.get(workspace_id=workspace_id, derived_id=made.id)
        names = [c.name for c in shown.columns]
        return shown.state == "idle" and names == ["payout_id", "currency", "net"]

    eventually(ran, timeout=RUN_SECONDS, what="the saved SQL's run", interval=0.5)
    page.reload()
    newest = runs_table(page).get_by_role("row").nth(1)
    expect(newest).to_contain_text("succeeded")
    expect(newest.get_by_role("cell").nth(3)).to_have_text("3")  # the rows
    assert serious_violations(page) == []


def test_a_viewer_previews_but_has_no_save(page: Page, site: Site, tenant: Tenant) -> None:
    made = defined(site, tenant)
    viewer = make_user(site.runtime, tenant.workspace_id, "viewer")
    sign_in_page(page, viewer.name)
    page.goto(f"/console/transformations/{made.id}")
    expect(page.get_by_role("button", name="Save")).to_have_count(0)
    expect(page.get_by_text("Only an admin can save a definition.")).to_be_visible()
    page.get_by_role("button", name="Preview").click()
    preview = page.get_by_role("table", name=re.compile("^The first 3 rows"))
    expect(preview.get_by_role("row").nth(2)).to_contain_text("-310.25")
    assert serious_violations(page) == []


def test_an_admin_creates_a_transformation_from_the_new_page(
    page: Page, site: Site, tenant: Tenant
) -> None:
    made = defined(site, tenant)
    admin = make_user(site.runtime, tenant.workspace_id, "admin")
    sign_in_page(page, admin.name)
    page.goto(f"/console/transformations/{made.id}")
    page.get_by_role("link", name="New transformation").click()
    expect(page.get_by_role("heading", name="New transformation")).to_be_visible()
    assert serious_violations(page) == []
    page.get_by_label("Name", exact=True).fill("EUR payouts")
    page.get_by_label("Name in the SQL of input 1").fill("p")
    payouts = made.definition["inputs"]["p"]
    page.get_by_label("Resource of input 1").select_option(f"{payouts}")
    page.get_by_label("SQL", exact=True).fill("SELECT p.payout_id, p.amount FROM p")
    page.get_by_role("button", name="Preview").click()
    preview = page.get_by_role("table", name=re.compile("^The first 4 rows"))
    expect(preview.get_by_role("row").nth(2)).to_contain_text("-310.25")
    expect(page.get_by_label("Name", exact=True)).to_have_value("EUR payouts")
    assert serious_violations(page) == []
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status")).to_have_text("Created. Its first run is queued.")
    expect(page.get_by_role("heading", name="EUR payouts")).to_be_visible()
    expect(page.get_by_role("link", name="Stripe payouts", exact=True)).to_be_visible()
