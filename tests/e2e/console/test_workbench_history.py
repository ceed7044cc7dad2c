"""The workbench's Summary and History views in a real browser (Debian's chromium)
against a real `tally serve` and its worker, both backends: the summary's figures are
GET /api/v2/reconciliations/{id}'s for every status and side; "Run now" (admins); the
definition shown readably and edited as JSON, an error named by its field next to the
editor, a valid edit saved, a 409 on a definition changed meanwhile; the history of
actions taken through the API (a key's fingerprint) and the console (a user's name),
filtered by actor and kind, an undo its own entry, Undo from the history with the
keyboard, its CSV export equal value by value; axe on each view; photographed for
docs/console.md."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from support.browser import serious_violations, sign_in_page
from support.console import Site, make_user
from support.console_reconciliations import month_of_payments
from support.databases import BACKENDS
from support.factories import Tenant, make_tenant
from tally.services.authentication import api_key_actor

pytestmark = pytest.mark.slow

SCREENSHOTS = os.environ.get("TALLY_SCREENSHOTS")  # a folder: docs/console/ keeps them
KEY = [{"left": "reference", "right": "reference", "normalize": ["trim", "casefold"]}]
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
MATCH_STATUSES = ("matched", "matched_with_difference", "suggested", "manual")


def reconciliation(site: Site, tenant: Tenant) -> int:
    """Bank vs ledger, run: matched, with a difference, suggested and unmatched rows."""
    return month_of_payments(site.runtime, tenant, PASSES)[0]


def api(site: Site) -> httpx.Client:
    return httpx.Client(base_url=site.url, timeout=30)


def shown(site: Site, tenant: Tenant, reconciliation_id: int) -> dict[str, Any]:
    with api(site) as client:
        found = client.get(
            f"/api/v2/reconciliations/{reconciliation_id}", headers=tenant.v2_headers
        )
    assert found.status_code == 200, found.text
    return dict(found.json())


def actions(site: Site, tenant: Tenant, reconciliation_id: int) -> list[dict[str, Any]]:
    with api(site) as client:
        found = client.get(
            f"/api/v2/reconciliations/{reconciliation_id}/actions", headers=tenant.v2_headers
        )
    assert found.status_code == 200, found.text
    return list(found.json()["data"])


def photograph(page: Page, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> None:
    """On the first backend only: docs/console/<name>.png when TALLY_SCREENSHOTS is set."""
    if request.node.callspec.params.get("site", BACKENDS[0]) == BACKENDS[0]:
        folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        page.set_viewport_size({"width": 1100, "height": 700})
        page.screenshot(path=folder / name, full_page=True)


def test_summary_figures_run_now_and_the_definition_edited_as_json(
    page: Page, site: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenant = make_tenant(site.runtime.engine)
    reconciliation_id = reconciliation(site, tenant)
    admin = make_user(site.runtime, tenant.workspace_id, "admin")
    sign_in_page(page, admin.name)
    page.goto(f"/console/reconciliations/{reconciliation_id}")
    last_run = shown(site, tenant, reconciliation_id)["last_run"]
    counts, amounts = last_run["counts"], last_run["amounts"]
    by_status = page.get_by_role("table", name="By status")
    for status in MATCH_STATUSES:
        row = by_status.get_by_role("row").filter(
            has=page.get_by_role("rowheader", name=status, exact=True)
        )
        expect(row).to_contain_text(f"{counts[status]} match")
    for status in ("unmatched", "resolved"):
        row = by_status.get_by_role("row").filter(
            has=page.get_by_role("rowheader", name=status, exact=True)
        )
        for side, name in (("left", "bank"), ("right", "ledger")):
            expect(row).to_contain_text(f"{counts[f'{status}_{side}']} {name} row")
    table = page.get_by_role("table", name="Amounts")
    for side in ("left", "right"):
        for bucket in ("matched", "unmatched", "resolved"):
            expect(table).to_contain_text(amounts[side][bucket])
    # the definition, readably
    expect(page.get_by_role("heading", name="Pass 2: reference, small differences")).to_be_visible()
    expect(page.get_by_text("bank.reference")).to_have_count(2)
    expect(page.get_by_text("suggested: an analyst confirms or rejects each")).to_be_visible()
    assert serious_violations(page) == []
    photograph(page, request, tmp_path, "workbench-summary.png")
    # Run now: queued through the service, kept with the admin's name
    page.get_by_role("button", name="Run now").click()
    expect(page.get_by_role("status")).to_contain_text("Run queued")
    run = actions(site, tenant, reconciliation_id)[-1]
    assert (run["kind"], run["actor"]) == ("run", admin.name)
    # an error named by its field, next to the editor that it describes
    editor = page.get_by_label("Definition of Bank vs ledger, as JSON")
    definition = json.loads(editor.input_value())
    definition["passes"][1]["amount_tolerance"] = "-0.05"
    editor.fill(json.dumps(definition, indent=2))
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("passes[1].amount_tolerance")
    problem = page.locator("li", has_text="passes[1].amount_tolerance")
    expect(problem).to_be_visible()
    problem_id = problem.get_attribute("id")
    assert problem_id is not None
    expect(editor).to_have_attribute("aria-describedby", f"definition-hint {problem_id}")
    expect(editor).to_have_attribute("aria-invalid", "true")
    assert serious_violations(page) == []
    # a valid edit saved, kept in the history with the admin's name
    definition["passes"][1]["amount_tolerance"] = "0.10"
    editor.fill(json.dumps(definition, indent=2))
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Saved")
    saved = shown(site, tenant, reconciliation_id)["definition"]
    assert saved["passes"][1]["amount_tolerance"] == "0.10"
    assert actions(site, tenant, reconciliation_id)[-1]["actor"] == admin.name
    # changed meanwhile through the API: a 409 on the page, nothing overwritten
    with api(site) as client:
        theirs = {**saved, "name": "Bank vs ledger (theirs)"}
        replaced = client.put(
            f"/api/v2/reconciliations/{reconciliation_id}", json=theirs, headers=tenant.v2_headers
        )
    assert replaced.status_code == 200, replaced.text
    editor.fill(json.dumps({**saved, "name": "Bank vs ledger (mine)"}))
    with page.expect_response(lambda r: r.request.method == "POST") as answered:
        page.get_by_role("button", name="Save").click()
    assert answered.value.status == 409
    expect(page.get_by_role("alert")).to_contain_text("changed since you opened this page")
    assert shown(site, tenant, reconciliation_id)["name"] == "Bank vs ledger (theirs)"


def test_history_filters_undo_and_export(
    page: Page, site: Site, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tenant = make_tenant(site.runtime.engine)
    reconciliation_id = reconciliation(site, tenant)
    base = f"/api/v2/reconciliations/{reconciliation_id}"
    with api(site) as client:
        resolved = client.post(
            f"{base}/resolutions",
            json={"side": "left", "rows": [5], "reason": "bank_fee", "note": "November fee"},
            headers=tenant.v2_headers,
        )
        assert resolved.status_code == 201, resolved.text
        matched = client.post(
            f"{base}/matches",
            json={"left_rows": [6], "right_rows": [5], "note": "part payment, rest in Dec"},
            headers=tenant.v2_headers,
        )
        assert matched.status_code == 201, matched.text
        asked = client.post(f"{base}/runs", headers=tenant.v2_headers)
        assert asked.status_code == 202, asked.text
    analyst = make_user(site.runtime, tenant.workspace_id, "analyst")
    sign_in_page(page, analyst.name)
    page.goto(f"/console/reconciliations/{reconciliation_id}")
    page.get_by_role("navigation", name="Workbench").get_by_role("link", name="History").click()
    table = page.get_by_role("table", name="History")
    expect(table.get_by_role("row")).to_have_count(1 + 3)
    key = api_key_actor(tenant.key)
    expect(table.get_by_role("row").nth(1)).to_contain_text("Run asked for")
    expect(table.get_by_role("row").nth(1)).to_contain_text(key)
    # Undo the resolution from the history, with the keyboard alone
    resolution_id = resolved.json()["id"]
    note = page.get_by_label(f"Note for undoing action {resolution_id}")
    note.focus()
    page.keyboard.type("booked twice: the fee is in the ledger")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name=f"Undo action {resolution_id}")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text(f"Action {resolution_id} undone")
    newest = table.get_by_role("row").nth(1)
    expect(newest).to_contain_text("Undo")
    expect(newest).to_contain_text(f"of action {resolution_id} (resolved)")
    expect(newest).to_contain_text(analyst.name)
    expect(newest).to_contain_text("booked twice: the fee is in the ledger")
    expect(table.get_by_role("row")).to_have_count(1 + 4)
    assert serious_violations(page) == []
    photograph(page, request, tmp_path, "workbench-history.png")
    # filters, each in the URL
    page.get_by_label("Actor").select_option(key)
    page.get_by_label("Kind").select_option("match")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(
        f"{site.url}/console/reconciliations/{reconciliation_id}/history?"
        f"actor={key.replace(' ', '+').replace(':', '%3A')}&kind=match"
    )
    expect(table.get_by_role("row")).to_have_count(1 + 1)
    expect(table).to_contain_text("bank row 6; ledger row 5")
    page.get_by_label("Actor").select_option(analyst.name)
    page.get_by_label("Kind").select_option("")
    page.get_by_role("button", name="Filter").click()
    expect(table.get_by_role("row")).to_have_count(1 + 1)
    assert serious_violations(page) == []
    # the whole history as CSV, value by value the API's
    page.get_by_role("link", name="Clear").click()
    with page.expect_download() as started:
        page.get_by_role("link", name="Export CSV").click()
    saved = tmp_path / "history.csv"
    started.value.save_as(saved)
    header, *lines = list(csv.reader(io.StringIO(saved.read_text("utf-8"), newline="")))
    assert header == [
        "Time",
        "Kind",
        "Actor",
        "Action",
        "Match",
        "bank rows",
        "ledger rows",
        "Reason",
        "Note",
    ]
    taken = {a["id"]: a for a in actions(site, tenant, reconciliation_id)}
    assert len(lines) == len(taken) + 1  # and the undo
    for time, kind, actor, action, match, left, right, reason, note_text in lines:
        one = taken[int(action)]
        if kind == "undo":
            assert (time, actor, note_text) == (
                one["undone_at"],
                one["undo_actor"],
                one["undo_note"],
            )
        else:
            assert (time, kind, actor, note_text) == (
                one["created_at"],
                one["kind"],
                one["actor"],
                one["note"] or "",
            )
        assert (match, left, right, reason) == (
            "" if one["match_id"] is None else str(one["match_id"]),
            " ".join(map(str, one["left_rows"])),
            " ".join(map(str, one["right_rows"])),
            one["reason"] or "",
        )
