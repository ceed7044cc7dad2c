"""The console in a real browser (Debian's chromium through Playwright) against a real
`tally serve`, one per backend for the module: sign-in, invite, sign-out, lockout,
roles, cross-origin forms, hostile file contents, other workspaces' URLs, accessibility.

Each test makes its own users and workspaces (names unique in the installation) and
opens its own browser context (no cookie shared between tests)."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import PASSWORD, SIGN_IN_MAX_FAILURES, Site, add_file, make_user
from support.databases import BACKENDS
from support.factories import Tenant, make_source, make_tenant
from tally.core.files import FileStatus
from tally.core.users import User

pytestmark = pytest.mark.slow

HOSTILE_NAME = '"><img src=x onerror=alert(1)>'
HOSTILE_COLUMN = "<script>alert(1)</script>"
BANK_CSV = (
    "booked_on,reference,amount,counterparty\n"
    "2026-11-23,INV-1042,1250.00,Acme Ltd\n"
    "2026-11-24,INV-1043,-310.25,Harbor Dairy S.A.\n"
    "2026-11-24,FEE-11,-2.50,Bank fee\n"
)
LEDGER_CSV = "entry,date,account,amount\n1,2026-11-23,1200,1250.00\n2,2026-11-24,1200,-310.25\n"


def user(site: Site, tenant: Tenant, role: str) -> User:
    return make_user(site.runtime, tenant.workspace_id, role)


def test_signing_in_leads_to_the_overview_and_a_wrong_password_does_not(
    page: Page, site: Site, tenant: Tenant
) -> None:
    alice = user(site, tenant, "viewer")
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    sign_in_page(page, alice.name, "not the password")
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    expect(page.get_by_label("Username")).to_have_value(alice.name)
    sign_in_page(page, alice.name)
    expect(page).to_have_url(re.compile(r"/console/overview$"))
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/console/overview$"))


def test_an_invite_sets_the_password_once(page: Page, site: Site, tenant: Tenant) -> None:
    issued = site.runtime.users.create_user(
        workspace_id=tenant.workspace_id, name=f"invitee-{tenant.workspace_id}", role="analyst"
    )
    invite = "/console/invite/" + issued.token
    page.goto(invite)
    expect(page.get_by_role("heading", name="Choose your password")).to_be_visible()
    page.get_by_label("Password", exact=True).fill("a long enough password")
    page.get_by_label("Confirm password").fill("another long password")
    page.get_by_role("button", name="Set password").click()
    expect(page.get_by_role("alert")).to_have_text("The two passwords are not the same.")
    page.get_by_label("Password", exact=True).fill("a long enough password")
    page.get_by_label("Confirm password").fill("a long enough password")
    page.get_by_role("button", name="Set password").click()
    expect(page).to_have_url(re.compile(r"/console/sign-in\?password_set=true$"))
    expect(page.get_by_role("status")).to_have_text("Your password is set. Sign in with it.")
    sign_in_page(page, issued.user.name, "a long enough password")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    page.goto(invite)  # used: refused, whoever opens it
    expect(page.get_by_role("heading", name="Invite not valid")).to_be_visible()


def test_the_browser_refuses_a_short_password_before_sending_it(
    page: Page, site: Site, tenant: Tenant
) -> None:
    issued = site.runtime.users.create_user(
        workspace_id=tenant.workspace_id, name=f"short-{tenant.workspace_id}", role="viewer"
    )
    page.goto("/console/invite/" + issued.token)
    page.get_by_label("Password", exact=True).fill("elevenchars")
    page.get_by_label("Confirm password").fill("elevenchars")
    page.get_by_role("button", name="Set password").click()
    assert page.get_by_label("Password", exact=True).evaluate("e => e.validity.tooShort")
    assert site.runtime.users.invited_user(issued.token).name == issued.user.name  # still open


def test_sign_out_ends_the_session(page: Page, site: Site, tenant: Tenant) -> None:
    bob = user(site, tenant, "analyst")
    sign_in_page(page, bob.name)
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    page.goto("/console/overview")
    expect(page).to_have_url(re.compile(r"/console/sign-in$"))


def test_repeated_failures_lock_a_username_known_or_not(
    page: Page, site: Site, tenant: Tenant
) -> None:
    carol = user(site, tenant, "viewer")
    messages = {}
    for name in (carol.name, f"nobody-{tenant.workspace_id}"):
        for _ in range(SIGN_IN_MAX_FAILURES):
            sign_in_page(page, name, "a wrong password")
            expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
        sign_in_page(page, name, PASSWORD)  # the right one, too late
        messages[name] = page.get_by_role("alert").inner_text()
        expect(page).to_have_url(re.compile(r"/console/sign-in$"))
    assert set(messages.values()) == {
        "Too many failed sign-ins for this username: try again in a few minutes."
    }


def post_from_devtools(page: Page, action: str) -> tuple[int, str]:
    """A form built in the signed-in page and submitted (what a user forging a request
    from the browser's console can do): same-origin, with the session cookie."""
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.evaluate(
            """action => {
                const form = document.createElement("form");
                form.method = "post";
                form.action = action;
                document.body.append(form);
                form.submit();
            }""",
            action,
        )
    response = answer.value
    return response.status, response.text()


def test_a_viewers_forged_post_is_403(page: Page, site: Site, tenant: Tenant) -> None:
    viewer = user(site, tenant, "viewer")
    victim = user(site, tenant, "analyst")
    sign_in_page(page, viewer.name)
    expect(page.get_by_role("link", name="Users")).to_have_count(0)  # not offered
    status, text = post_from_devtools(page, f"/console/users/{victim.id}/disable")
    assert status == 403
    assert "Not allowed" in text
    assert not site.runtime.users.get_user(victim.id).disabled


def test_an_admin_disables_a_user_from_the_users_page(
    page: Page, site: Site, tenant: Tenant
) -> None:
    admin = user(site, tenant, "admin")
    victim = user(site, tenant, "viewer")
    sign_in_page(page, admin.name)
    page.get_by_role("link", name="Users").click()
    page.get_by_role("button", name=f"Disable {victim.name}").click()
    expect(page.get_by_role("status")).to_have_text(f"{victim.name} is disabled.")
    assert site.runtime.users.get_user(victim.id).disabled


def test_a_form_posted_from_another_site_is_refused(
    page: Page, context: BrowserContext, site: Site, tenant: Tenant
) -> None:
    admin = user(site, tenant, "admin")
    victim = user(site, tenant, "viewer")
    sign_in_page(page, admin.name)
    evil = (
        "<!doctype html><title>Win a prize</title>"
        f'<form method="post" action="{site.url}/console/users/{victim.id}/disable">'
        "<button>Claim</button></form>"
    )
    context.route(
        "http://evil.example/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=evil),
    )
    page.goto("http://evil.example/prize")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name="Claim").click()
    assert answer.value.status == 403
    expect(page.get_by_role("heading", name="Refused")).to_be_visible()
    assert not site.runtime.users.get_user(victim.id).disabled
    page.goto(f"{site.url}/console/overview")
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()  # still signed in


def test_hostile_file_contents_show_as_text(page: Page, site: Site, tenant: Tenant) -> None:
    """A source named like markup, whose file's header cell is a script: both are text
    on the overview and the resource's page; no script runs (the `page` fixture checks
    that no dialog opened), no image element is made."""
    csv = f"id,{HOSTILE_COLUMN},amount\n1,x,10.50\n"
    source = make_source(site.runtime.engine, tenant, csv, name=HOSTILE_NAME)
    sign_in_page(page, user(site, tenant, "viewer").name)
    link = page.get_by_role("link", name=HOSTILE_NAME, exact=True)
    expect(link).to_be_visible()
    expect(link).to_have_attribute("href", f"/console/sources/{source.id}")  # its kind's page
    expect(page.get_by_role("row").filter(has=link)).to_contain_text("Source")
    assert page.locator("main img").count() == 0
    page.get_by_role("link", name=f"Rows of {HOSTILE_NAME}", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/console/resources/{source.id}$"))
    expect(page.get_by_role("heading", name=HOSTILE_NAME)).to_be_visible()
    expect(page.get_by_role("columnheader", name=HOSTILE_COLUMN)).to_be_visible()
    assert page.locator("main img, main script").count() == 0


def test_another_workspaces_resource_is_answered_as_a_missing_one(
    page: Page, site: Site, tenant: Tenant
) -> None:
    theirs = make_source(site.runtime.engine, make_tenant(site.runtime.engine), "id\n1\n")
    ours = make_source(site.runtime.engine, tenant, "id\n1\n")
    sign_in_page(page, user(site, tenant, "admin").name)
    answers = []
    for resource_id in (theirs.id, 2_000_000_000, "not-a-number"):
        response = page.goto(f"/console/resources/{resource_id}")
        assert response is not None
        answers.append((response.status, page.locator("main").inner_text()))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][0] == 404
    assert page.goto(f"/console/resources/{ours.id}").status == 200  # type: ignore[union-attr]


def test_every_page_passes_axe_without_a_serious_violation(
    page: Page, site: Site, tenant: Tenant, tmp_path: Path
) -> None:
    issued = site.runtime.users.create_user(
        workspace_id=tenant.workspace_id, name=f"axe-{tenant.workspace_id}", role="admin"
    )
    source = make_source(site.runtime.engine, tenant, "id,amount\n1,10.50\n", name="bank")
    found = {}
    page.goto("/console/sign-in")
    found["sign-in"] = serious_violations(page)
    page.goto("/console/invite/" + issued.token)
    found["invite"] = serious_violations(page)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Confirm password").fill(PASSWORD)
    page.get_by_role("button", name="Set password").click()
    sign_in_page(page, issued.user.name)
    for name, path in [
        ("overview", "/console/overview"),
        ("resource", f"/console/resources/{source.id}"),
        ("users", "/console/users"),
        ("not found", "/console/nowhere"),
    ]:
        page.goto(path)
        found[name] = serious_violations(page)
    assert found == {name: [] for name in found}


SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them


def test_each_screen_as_a_finance_team_sees_it(
    page: Page, site: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A workspace with a bank statement (a failed file among its last ones), a ledger
    and a reconciliation's output; each screen renders, and is photographed: into
    TALLY_SCREENSHOTS when set (docs/console.md shows them), else into tmp_path."""
    tenant = make_tenant(site.runtime.engine)
    now = dt.datetime.now(dt.UTC)
    bank = make_source(site.runtime.engine, tenant, BANK_CSV, name="Bank statement (EUR)")
    for days, status in ((3, FileStatus.DELIVERED), (2, FileStatus.FAILED), (1, "delivered")):
        add_file(
            site.runtime.engine,
            bank.id,
            at=now - dt.timedelta(days=days),
            status=FileStatus(status),
            name=f"stmt-{(now - dt.timedelta(days=days)):%Y-%m-%d}.csv",
        )
    ledger = make_source(site.runtime.engine, tenant, LEDGER_CSV, name="General ledger")
    body = {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": bank.id, "amount": "amount", "date": "booked_on"},
        "right": {"name": "ledger", "resource_id": ledger.id, "amount": "amount", "date": "date"},
        "passes": [{"name": "amount and date", "type": "one_to_one", "keys": []}],
    }
    rec = site.runtime.reconciliations.create(workspace_id=tenant.workspace_id, body=body)
    site.runtime.derived.run_now(rec.id, kind="reconciliation", worker="test")
    issued = site.runtime.users.create_user(
        workspace_id=tenant.workspace_id, name=f"maria-{tenant.workspace_id}", role="admin"
    )
    make_user(site.runtime, tenant.workspace_id, "analyst", name=f"tom-{tenant.workspace_id}")
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size({"width": 1100, "height": 640})

    def photograph(name: str) -> None:
        if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
            page.screenshot(path=folder / f"{name}.png", full_page=True)

    page.goto("/console/sign-in")
    photograph("sign-in")
    page.goto("/console/invite/" + issued.token)
    photograph("invite")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Confirm password").fill(PASSWORD)
    page.get_by_role("button", name="Set password").click()
    sign_in_page(page, issued.user.name)
    expect(page.get_by_role("link", name="Bank statement (EUR)", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Reconciliations")).to_be_visible()
    figures = page.get_by_role("row").filter(has_text="Bank vs ledger").last
    expect(figures).to_contain_text("-2.50")
    expect(figures).to_contain_text("%")  # the shares by count and by value
    expect(figures).to_contain_text("days")  # the oldest unmatched item's age
    assert serious_violations(page) == []
    photograph("overview")
    page.get_by_role("link", name="Rows of Bank statement (EUR)").click()
    expect(page.get_by_role("columnheader", name="amount")).to_be_visible()
    page.get_by_role("link", name="Users").click()
    expect(page.get_by_role("rowheader", name=f"tom-{tenant.workspace_id}")).to_be_visible()
    photograph("users")
