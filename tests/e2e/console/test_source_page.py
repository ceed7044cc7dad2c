"""The source page in a real browser (Debian's chromium through Playwright) against a
real `tally serve` with its worker, on both backends: an upload through the real file
chooser with its progress and the file's status as the worker finishes it (and without
script: the form posts and the file's page shows it), a refused upload's error beside
the field, the webhook's new id shown once, "Retry now" by keyboard against a receiver on
loopback, hostile file names as text, and axe on every state."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, add_file, make_user
from support.databases import BACKENDS
from support.factories import make_source, make_tenant
from support.source_page import deliveries_of, running_receiver, webhook_source
from support.waiting import eventually
from tally.core.files import FileStatus
from tally.core.status_callbacks import DeliveryState

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them
STATEMENT = "booked_on,reference,amount\n2026-11-23,INV-1042,1250.00\n2026-11-24,FEE-11,-2.50\n"
HOSTILE = '"><img src=x onerror=alert(1)>.csv'


def admin_on_source(page: Page, site: Site, csv: str = STATEMENT) -> tuple[int, str]:
    """A workspace with a source; its admin signed in on the source's page."""
    tenant = make_tenant(site.runtime.engine, ingestion=True)
    source = make_source(site.runtime.engine, tenant, csv, name="Bank statement (EUR)")
    admin = make_user(site.runtime, tenant.workspace_id, "admin")
    sign_in_page(page, admin.name)
    page.goto(f"/console/sources/{source.id}")
    return source.id, admin.name


def test_an_upload_shows_its_progress_and_the_files_status(
    page: Page, site: Site, tmp_path: Path
) -> None:
    source_id, admin = admin_on_source(page, site)
    chosen = tmp_path / HOSTILE  # a name the page and the script must show as text
    chosen.write_text(STATEMENT + "2026-11-25,INV-1044,80.10\n")
    page.get_by_label("CSV file").set_input_files(chosen)
    page.get_by_role("button", name="Upload").focus()
    page.keyboard.press("Enter")
    status = page.locator("#upload-status")
    expect(status).to_contain_text("Delivered: 3 rows loaded.", timeout=30_000)
    expect(page.locator("#upload-progress")).to_have_attribute("value", "100")
    assert serious_violations(page) == []
    status.get_by_role("link").click()
    expect(
        page.get_by_role("heading", name=re.compile(r"^File \d+ of Bank statement"))
    ).to_be_visible()
    expect(page.locator("#file-facts")).to_contain_text(f"upload, sent by {admin}")
    assert serious_violations(page) == []
    page.goto(f"/console/sources/{source_id}")
    # Browsers send `"` in a form's file name as %22 (the HTML standard): the rest as is.
    row = page.get_by_role("row").filter(has_text=HOSTILE.lstrip('"'))
    expect(row).to_contain_text("delivered")
    expect(row).to_contain_text(f"by {admin}")
    expect(page.locator("main img")).to_have_count(0)  # the name is text, not markup


def test_a_refused_upload_says_why_beside_the_field(page: Page, site: Site, tmp_path: Path) -> None:
    admin_on_source(page, site)
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    page.get_by_label("CSV file").set_input_files(empty)
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("alert")).to_have_text("The file is empty: a header line is required.")
    expect(page.get_by_label("CSV file")).to_be_focused()
    expect(page.get_by_label("CSV file")).to_have_attribute("aria-invalid", "true")
    assert serious_violations(page) == []


def test_without_script_the_form_posts_and_the_files_page_shows_it(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    context = browser.new_context(base_url=site.url, java_script_enabled=False)
    try:
        page = context.new_page()
        source_id, _ = admin_on_source(page, site)
        chosen = tmp_path / "by-form.csv"
        chosen.write_text(STATEMENT + "2026-11-26,INV-1045,9.99\n")
        page.get_by_label("CSV file").set_input_files(chosen)
        page.get_by_role("button", name="Upload").click()
        expect(page).to_have_url(re.compile(rf"/console/sources/{source_id}/files/\d+$"))
        expect(page.locator("#file-facts")).to_contain_text("by-form.csv")

        def delivered() -> bool:
            page.reload()
            return page.locator("#file-status").inner_text() == "delivered"

        eventually(delivered, timeout=30, what="the uploaded file to be delivered", interval=0.5)
    finally:
        context.close()


def test_a_new_webhook_id_is_shown_once(page: Page, site: Site) -> None:
    tenant = make_tenant(site.runtime.engine, ingestion=True)
    hooked = webhook_source(
        site.runtime, tenant.workspace_id, "Card payouts", "http://127.0.0.1:9/"
    )
    sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "admin").name)
    page.goto(f"/console/sources/{hooked.id}")
    expect(page.get_by_text("POST /api/v2/webhooks/whk_…/feed-source")).to_be_visible()
    page.get_by_role("button", name="Rotate webhook id").click()
    new_id = page.locator("#new-webhook-id").inner_text()
    assert new_id.startswith("whk_")
    assert serious_violations(page) == []
    notification = {"file_url": "http://127.0.0.1:9/p.csv", "filename": "p.csv"}
    old = httpx.post(
        f"{site.url}/api/v2/webhooks/{hooked.webhook_id}/feed-source", json=notification
    )
    assert old.status_code == 404
    page.get_by_role("link", name="Back to Card payouts").click()
    assert new_id not in page.content()
    page.reload()
    assert new_id not in page.content()
    expect(page.get_by_role("button", name="Rotate webhook id")).to_be_visible()


def test_retry_now_by_keyboard_sends_a_failed_notification_again(
    page: Page, site: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenant = make_tenant(site.runtime.engine, ingestion=True)
    with running_receiver() as (receiver, hook_url):
        hooked = webhook_source(site.runtime, tenant.workspace_id, "Card payouts", hook_url)
        accepted = httpx.post(
            f"{site.url}/api/v2/webhooks/{hooked.webhook_id}/feed-source",
            json={"file_url": "http://127.0.0.1:9/payouts.csv", "filename": "payouts.csv"},
        )
        assert accepted.status_code == 200

        def failed() -> int | None:
            found = deliveries_of(site.runtime, tenant.workspace_id, hooked.id)
            done = [d.id for d in found if d.event == "file.accepted"]
            return done[0] if done and found[-1].state is DeliveryState.FAILED else None

        delivery_id = eventually(failed, timeout=30, what="the notification to fail")
        sign_in_page(page, make_user(site.runtime, tenant.workspace_id, "admin").name)
        _photograph_source(page, site, hooked.id, request)
        receiver.refusing = False
        page.goto(f"/console/sources/{hooked.id}")
        assert serious_violations(page) == []
        page.get_by_role("button", name=f"Retry delivery {delivery_id} now").focus()
        page.keyboard.press("Enter")
        expect(page.get_by_role("status").first).to_have_text(
            f"Delivery {delivery_id} is due now: the worker sends it next."
        )

        def delivered() -> bool:
            found = deliveries_of(site.runtime, tenant.workspace_id, hooked.id)
            return any(d.id == delivery_id and d.state is DeliveryState.DELIVERED for d in found)

        eventually(delivered, timeout=30, what="the retried notification")
        page.reload()
        row = page.get_by_role("row").filter(
            has=page.get_by_role("rowheader", name=str(delivery_id), exact=True)
        )
        expect(row).to_contain_text("delivered")
        expect(row).to_contain_text("200")


def _photograph_source(
    page: Page, site: Site, source_id: int, request: pytest.FixtureRequest
) -> None:
    """The source page as docs/console.md shows it (the first backend only), with a
    history of files. Only when TALLY_SCREENSHOTS is set."""
    if not SCREENSHOTS or request.node.callspec.params.get("site", BACKENDS[0]) != BACKENDS[0]:
        return
    now = dt.datetime.now(dt.UTC)
    for days, status in (
        (3, FileStatus.DELIVERED),
        (2, FileStatus.FAILED),
        (1, FileStatus.DELIVERED),
    ):
        at = now - dt.timedelta(days=days)
        add_file(
            site.runtime.engine, source_id, at=at, status=status, name=f"payouts-{at:%Y-%m-%d}.csv"
        )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"/console/sources/{source_id}")
    folder = Path(SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=folder / "source.png", full_page=True)
