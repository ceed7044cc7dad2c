"""GET /api/v2/resources and the service behind it (the console's overview reads the
same): every resource of the workspace with its columns, rows and data version; per
source its last file and the files that failed in the last 7 days. Both backends."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import httpx

from support.console import add_file, make_user, sign_in
from support.factories import Tenant, make_source, make_tenant, write_file
from support.reconciliations import definition, make_pair
from tally.core.files import FileStatus
from tally.runtime import Runtime
from tally.services.resource_listing import ResourceListing

CSV = "id,amount,booked_on\n1,10.50,2024-01-31\n2,-3.25,2024-02-01\n"


def test_the_listing_names_every_resource_with_its_columns(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    tenant = ingestion_tenant
    source = make_source(runtime.engine, tenant, CSV, name="bank")
    make_source(runtime.engine, make_tenant(runtime.engine), CSV, name="another workspace's")
    response = api.get("/api/v2/resources", headers=tenant.v2_headers)
    assert response.status_code == 200
    body = response.json()
    assert body["next_after"] is None
    [listed] = body["data"]
    assert listed["id"] == source.id
    assert listed["kind"] == "source"
    assert listed["name"] == "bank"
    assert listed["rows"] == 2
    assert listed["data_version"] == source.data_version
    assert listed["columns"] == [
        {"name": "id", "type": "integer"},
        {"name": "amount", "type": "decimal"},
        {"name": "booked_on", "type": "date"},
    ]
    assert listed["last_file"] is None
    assert listed["failed_files_7d"] == 0


def test_the_listing_needs_no_ingestion_switch_but_a_key(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    make_source(runtime.engine, tenant, CSV)
    assert api.get("/api/v2/resources", headers=tenant.v2_headers).status_code == 200
    wrong = {**tenant.v2_headers, "x-api-key": "tly_wrong"}
    assert api.get("/api/v2/resources", headers=wrong).status_code == 403


def test_pages_go_by_id(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> None:
    made = [make_source(runtime.engine, tenant, CSV, name=f"s{n}").id for n in range(3)]
    seen, after = [], 0
    while after is not None:
        page = api.get(
            "/api/v2/resources", headers=tenant.v2_headers, params={"after": after, "limit": 2}
        ).json()
        seen += [r["id"] for r in page["data"]]
        after = page["next_after"]
    assert seen == made


def test_a_sources_last_file_and_failures_of_the_last_7_days(
    runtime: Runtime, tenant: Tenant
) -> None:
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
    source = make_source(runtime.engine, tenant, CSV, name="bank")
    add_file(
        runtime.engine, source.id, at=now - dt.timedelta(days=8), status=FileStatus.FAILED, name="a"
    )
    add_file(
        runtime.engine, source.id, at=now - dt.timedelta(days=6), status=FileStatus.FAILED, name="b"
    )
    add_file(
        runtime.engine, source.id, at=now - dt.timedelta(days=2), status=FileStatus.FAILED, name="c"
    )
    last = add_file(
        runtime.engine,
        source.id,
        at=now - dt.timedelta(hours=1),
        status=FileStatus.DELIVERED,
        name="d",
    )
    listing = ResourceListing(runtime.engine, clock=lambda: now)
    [summary] = listing.list_page(workspace_id=tenant.workspace_id).resources
    assert summary.failures == 2  # the one of 8 days ago is out of the window
    assert summary.last_file is not None
    assert (summary.last_file.id, summary.last_file.status, summary.last_file.filename) == (
        last,
        "delivered",
        "d",
    )
    later = ResourceListing(runtime.engine, clock=lambda: now + dt.timedelta(days=3))
    assert later.get(workspace_id=tenant.workspace_id, resource_id=source.id).failures == 1


def test_a_reconciliations_output_is_listed_without_files(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    pair = make_pair(runtime.engine, tenant)
    created = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(pair)
    )
    listed = api.get("/api/v2/resources", headers=tenant.v2_headers).json()["data"]
    assert [(r["id"], r["kind"]) for r in listed] == [
        (pair.bank, "source"),
        (pair.ledger, "source"),
        (created.resource_id, "reconciliation"),
    ]
    output = listed[2]
    assert output["name"] == "Bank vs ledger"
    assert (output["last_file"], output["failed_files_7d"]) == (None, None)
    assert {"name": "status", "type": "text"} in output["columns"]


def test_a_reconciliations_figures_come_from_its_last_run(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    tenant = ingestion_tenant
    pair = make_pair(runtime.engine, tenant)
    created = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(pair)
    )
    record = runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    last_run = record.last_run
    assert last_run is not None
    page = runtime.listing.list_page(workspace_id=tenant.workspace_id)
    [output] = [r for r in page.resources if r.kind == "reconciliation"]
    assert output.derived is not None
    assert (output.derived.id, output.derived.state) == (created.id, "idle")
    figures = output.derived.reconciliation
    assert figures is not None
    counts, amounts = last_run["counts"], last_run["amounts"]
    assert (
        figures.matches == counts["matched"] + counts["matched_with_difference"] + counts["manual"]
    )
    assert figures.suggested == counts["suggested"]
    rows = {"left": 3, "right": 4}  # BANK_CSV, LEDGER_CSV
    for side in figures.sides:
        unmatched = counts[f"unmatched_{side.side}"]
        assert side.unmatched_rows == unmatched
        assert side.unmatched_amount == amounts[side.side]["unmatched"]
        share = Decimal(rows[side.side] - unmatched) * 100 / rows[side.side]
        assert side.reconciled_percent == str(share.quantize(Decimal("0.1")))
    # the overview shows them, exact
    signed = make_user(runtime, tenant.workspace_id, "viewer")
    api.follow_redirects = False
    assert sign_in(api, signed.name).status_code == 303
    html = api.get("/console/overview").text
    assert "Reconciliations" in html
    assert amounts["left"]["unmatched"] in html
    # a new file on one side: its share waits for the next run
    runtime.catalogue.append_file(
        pair.bank, write_file("reference,amount,txn_date,memo\nREF-9,1.00,2024-01-09,x\n")
    )
    page = runtime.listing.list_page(workspace_id=tenant.workspace_id)
    [output] = [r for r in page.resources if r.kind == "reconciliation"]
    assert output.derived is not None
    assert output.derived.reconciliation is not None
    assert [s.reconciled_percent is None for s in output.derived.reconciliation.sides] == [
        True,
        False,
    ]


def test_one_source_is_read_as_the_listing_shows_it(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    tenant = ingestion_tenant
    pair = make_pair(runtime.engine, tenant)
    created = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(pair)
    )
    listed = api.get("/api/v2/resources", headers=tenant.v2_headers).json()["data"]
    one = api.get(f"/api/v2/sources/{pair.bank}", headers=tenant.v2_headers)
    assert one.status_code == 200
    assert one.json() == listed[0]
    theirs = make_source(runtime.engine, make_tenant(runtime.engine), CSV)
    for missing in (created.resource_id, theirs.id, 999_999, 2**40):  # an output; another's
        answer = api.get(f"/api/v2/sources/{missing}", headers=tenant.v2_headers)
        assert answer.status_code == 404, missing
        assert answer.json() == {"errors": [{"field": None, "message": "Not Found"}]}
