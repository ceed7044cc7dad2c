"""The transformation page over HTTP (tally served by uvicorn on loopback, both
backends): its definition, inputs and readers linked both ways, the last run, Preview
(any role) with the columns and exact first rows or the error's place in the SQL, Save
(admins only, re-run; not over a definition changed meanwhile), the runs, hostile SQL
text and column names escaped, another workspace's transformation answered as a missing
one; and the admins' "New transformation" page."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest
from markupsafe import escape

from support.console import SAME_ORIGIN, make_user, sign_in
from support.factories import Tenant, make_source, make_tenant
from support.reconciliations import definition, make_pair
from support.transformations import FILTER_SQL, Inputs, make_inputs, run, transformation
from tally.core.errors import RunFailedError
from tally.runtime import Runtime
from tally.services.transformations.service import Transformation

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def browser(api: httpx.Client) -> httpx.Client:
    """The API client, not following redirects (each test reads where it is sent)."""
    api.follow_redirects = False
    return api


@pytest.fixture
def inputs(runtime: Runtime, tenant: Tenant) -> Inputs:
    return make_inputs(runtime.engine, tenant)


@pytest.fixture
def filtered(runtime: Runtime, tenant: Tenant, inputs: Inputs) -> Transformation:
    """A transformation over the settlements, run once."""
    made = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(inputs, "Settled", FILTER_SQL)
    )
    run(runtime, made.id)
    return made


def as_role(client: httpx.Client, runtime: Runtime, tenant: Tenant, role: str) -> None:
    user = make_user(runtime, tenant.workspace_id, role)
    assert sign_in(client, user.name).status_code == 303


def page_of(made: Transformation) -> str:
    return f"/console/transformations/{made.id}"


def post(client: httpx.Client, path: str, sql: str, base: str = "") -> httpx.Response:
    return client.post(path, data={"sql": sql, "base": base}, headers=SAME_ORIGIN)


def base_of(page: str) -> str:
    """The definition the page's form edits (its hidden `base`)."""
    found = re.search(r'<input type="hidden" name="base" value="([0-9a-f]{64})">', page)
    assert found is not None
    return found.group(1)


def save(client: httpx.Client, made: Transformation, sql: str) -> httpx.Response:
    """Open the page, then save this SQL from it, as an admin's browser does."""
    return post(client, page_of(made), sql, base_of(client.get(page_of(made)).text))


def text_of(response: httpx.Response) -> str:
    """The page's text, tags taken out and entities read (what a person sees)."""
    return html.unescape(re.sub(r"<[^>]+>", " ", response.text))


def test_the_page_shows_the_definition_inputs_and_last_run(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "viewer")
    response = browser.get(page_of(filtered))
    assert response.status_code == 200
    assert f'href="/console/resources/{filtered.resource_id}">Rows</a>' in response.text
    settlements = filtered.definition["inputs"]["s"]
    assert f'<a href="/console/sources/{settlements}">settlements</a>' in response.text
    textarea = re.search(
        r'<textarea id="sql" name="sql"[^>]*>\n(.*?)</textarea>', response.text, re.S
    )
    assert textarea is not None
    assert html.unescape(textarea.group(1)) == FILTER_SQL
    assert 'spellcheck="false"' in response.text
    assert "idle" in text_of(response)
    runs = response.text.split('id="runs"')[1]
    assert '<td class="num">4</td>' in runs  # the rows of the last run
    assert "Save</button>" not in response.text  # a viewer's page offers no Save


def test_inputs_and_readers_link_both_ways(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    reader = runtime.transformations.create(
        workspace_id=tenant.workspace_id,
        body={
            "name": "Doubled again",
            "inputs": {"t": filtered.resource_id},
            "sql": "SELECT t.payout_id, t.twice * 2 AS again FROM t",
        },
    )
    as_role(browser, runtime, tenant, "viewer")
    upstream = browser.get(page_of(filtered)).text.split('id="readers"')[1]
    assert f'<a href="/console/transformations/{reader.id}">Doubled again</a>' in upstream
    downstream = browser.get(page_of(reader)).text
    assert f'<a href="/console/transformations/{filtered.id}">Settled</a>' in downstream
    assert f'href="/console/resources/{filtered.resource_id}" aria-label="Rows of Settled"' in (
        downstream
    )


def test_preview_shows_the_columns_and_the_exact_first_rows(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "viewer")  # a preview changes nothing: every role
    edited = "SELECT s.payout_id, s.amount * 3 AS thrice\nFROM s WHERE s.currency = 'EUR'"
    response = post(browser, page_of(filtered) + "/preview", edited)
    assert response.status_code == 200, text_of(response)
    assert html.unescape(response.text).count(edited) == 1  # kept in the editor
    shown = response.text.split('id="preview"')[1]
    assert 'thrice <span class="muted">decimal</span>' in shown
    assert '<td class="num">30.300</td>' in shown  # 10.10 * 3, its digits as stored
    assert '<td class="num">3000000.003</td>' in shown
    assert "PO-2" not in shown
    unchanged = runtime.transformations.get(
        workspace_id=tenant.workspace_id, derived_id=filtered.id
    )
    assert unchanged.definition["sql"] == FILTER_SQL  # nothing kept


def test_preview_of_a_bad_sql_shows_its_line_and_column(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "analyst")
    response = post(browser, page_of(filtered) + "/preview", "SELECT s.payout_id,\n  nope\nFROM s")
    assert response.status_code == 400
    assert "unknown column &#39;nope&#39; (line 2, column 3)" in response.text
    assert 'aria-invalid="true"' in response.text
    assert '<pre class="sql-position" aria-label="Line 2, column 3"><code>  nope\n  ^</code>' in (
        response.text
    )


def test_an_admin_saves_and_the_transformation_runs_again(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "admin")
    edited = "SELECT s.payout_id FROM s WHERE s.status = 'void'"
    response = save(browser, filtered, edited + "\r\n")
    assert response.status_code == 303
    assert response.headers["location"] == page_of(filtered) + "?saved=1"
    saved = runtime.transformations.get(workspace_id=tenant.workspace_id, derived_id=filtered.id)
    assert saved.definition["sql"] == edited + "\n"  # a browser's CRLF is a line break
    assert saved.state == "queued"
    assert run(runtime, filtered.id)["rows"] == 1
    page = browser.get(response.headers["location"])
    assert "Saved. A run with the new SQL is queued." in page.text
    assert '<td class="num">1</td>' in page.text.split('id="runs"')[1]


def test_a_rejected_save_names_the_field_and_keeps_the_sql(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "admin")
    response = save(browser, filtered, "SELECT FROM WHERE")
    assert response.status_code == 400
    assert "the SQL does not parse" in response.text
    assert "SELECT FROM WHERE</textarea>" in response.text
    kept = runtime.transformations.get(workspace_id=tenant.workspace_id, derived_id=filtered.id)
    assert kept.definition["sql"] == FILTER_SQL


@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_a_save_by_a_lesser_role_is_403(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation, role: str
) -> None:
    as_role(browser, runtime, tenant, role)
    response = post(browser, page_of(filtered), "SELECT s.payout_id FROM s")
    assert response.status_code == 403
    kept = runtime.transformations.get(workspace_id=tenant.workspace_id, derived_id=filtered.id)
    assert kept.definition["sql"] == FILTER_SQL


def test_another_workspaces_transformation_or_a_reconciliation_is_the_404_page(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    other = make_tenant(runtime.engine)
    as_role(browser, runtime, other, "admin")
    missing = browser.get("/console/transformations/999999")
    assert missing.status_code == 404
    for response in (
        browser.get(page_of(filtered)),
        post(browser, page_of(filtered) + "/preview", "SELECT 1 AS a"),
        post(browser, page_of(filtered), "SELECT 1 AS a"),
    ):
        assert (response.status_code, response.text) == (404, missing.text)
    reconciliation = runtime.reconciliations.create(
        workspace_id=other.workspace_id, body=definition(make_pair(runtime.engine, other))
    )
    assert browser.get(f"/console/transformations/{reconciliation.id}").text == missing.text
    assert browser.get("/console/transformations/x").status_code == 404


def test_hostile_sql_text_and_column_names_are_escaped(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "viewer")
    sql = f"SELECT '{HOSTILE}' AS \"{HOSTILE}\", s.payout_id FROM s -- {HOSTILE}"
    response = post(browser, page_of(filtered) + "/preview", sql)
    assert response.status_code == 200, text_of(response)
    assert HOSTILE not in response.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in response.text.split('id="preview"')[1]
    rejected = post(browser, page_of(filtered) + "/preview", f"SELECT {HOSTILE}")
    assert rejected.status_code == 400
    assert HOSTILE not in rejected.text


def test_the_runs_are_listed_newest_first_with_a_failures_error_in_full(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    failing = {**filtered.definition, "sql": "SELECT CAST(s.currency AS INTEGER) AS n FROM s"}
    runtime.transformations.replace(
        workspace_id=tenant.workspace_id, derived_id=filtered.id, body=failing
    )
    with pytest.raises(RunFailedError) as failure:
        runtime.derived.run_now(filtered.id, kind="transformation", worker="test")
    as_role(browser, runtime, tenant, "viewer")
    runs = browser.get(page_of(filtered)).text.split('id="runs"')[1]
    rows = re.findall(r"<tr>(.*?)</tr>", runs, re.S)[1:]  # after the header
    assert len(rows) == 2
    assert '<span class="status-failed">failed</span>' in rows[0]
    assert f'<pre class="run-error">{escape(failure.value.message)}</pre>' in rows[0]
    assert '<span class="status-succeeded">succeeded</span>' in rows[1]
    assert '<td class="num">4</td>' in rows[1]


def test_a_save_over_a_definition_changed_meanwhile_is_409_until_saved_again(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, filtered: Transformation
) -> None:
    as_role(browser, runtime, tenant, "admin")
    opened = base_of(browser.get(page_of(filtered)).text)
    theirs = {**filtered.definition, "sql": "SELECT s.payout_id FROM s"}
    runtime.transformations.replace(
        workspace_id=tenant.workspace_id, derived_id=filtered.id, body=theirs
    )  # another admin, or the API, meanwhile
    mine = "SELECT s.currency FROM s"
    refused = post(browser, page_of(filtered), mine, opened)
    assert refused.status_code == 409
    assert "changed since you opened this page" in refused.text
    assert f"{mine}</textarea>" in refused.text
    service = runtime.transformations
    kept = service.get(workspace_id=tenant.workspace_id, derived_id=filtered.id)
    assert kept.definition["sql"] == theirs["sql"]
    again = post(browser, page_of(filtered), mine, base_of(refused.text))
    assert again.status_code == 303
    saved = service.get(workspace_id=tenant.workspace_id, derived_id=filtered.id)
    assert saved.definition["sql"] == mine


def new_form(name: str, inputs: dict[str, int | str], sql: str) -> dict[str, Any]:
    return {
        "name": name,
        "input_name": [*inputs, ""],  # and an empty row, as the page offers
        "input_resource": [*(str(r) for r in inputs.values()), ""],
        "sql": sql,
    }


def test_an_admin_previews_and_creates_a_new_transformation(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    as_role(browser, runtime, tenant, "admin")
    page = browser.get("/console/transformations/new")
    assert page.status_code == 200
    assert f'<option value="{inputs.bank}">bank (source {inputs.bank})</option>' in page.text
    form = new_form("EUR payouts", {"s": inputs.settlements}, "SELECT s.payout_id FROM s")
    previewed = browser.post("/console/transformations/new/preview", data=form, headers=SAME_ORIGIN)
    assert previewed.status_code == 200
    assert "<td>PO-3</td>" in previewed.text.split('id="preview"')[1]
    assert f'<option value="{inputs.settlements}" selected>' in previewed.text  # kept
    created = browser.post("/console/transformations/new", data=form, headers=SAME_ORIGIN)
    assert created.status_code == 303
    (made,) = runtime.transformations.list_defined(workspace_id=tenant.workspace_id)
    assert made.definition == {
        "name": "EUR payouts",
        "inputs": {"s": inputs.settlements},
        "sql": "SELECT s.payout_id FROM s",
    }
    assert created.headers["location"] == f"/console/transformations/{made.id}?created=1"
    assert "Created. Its first run is queued." in browser.get(created.headers["location"]).text


def test_a_new_transformations_problems_are_named_by_field(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    as_role(browser, runtime, tenant, "admin")
    theirs = make_source(runtime.engine, make_tenant(runtime.engine), "a\n1\n", name="theirs")
    form = new_form("settlements", {"s": theirs.id}, "SELECT s.a FROM s")
    refused = browser.post("/console/transformations/new", data=form, headers=SAME_ORIGIN)
    assert refused.status_code == 400
    assert "a resource named &#39;settlements&#39; already exists" in refused.text
    assert f"inputs.s: no resource {theirs.id} in this workspace" in refused.text
    assert 'id="name" name="name" value="settlements"' in refused.text
    assert runtime.transformations.list_defined(workspace_id=tenant.workspace_id) == []


@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_the_new_transformation_page_is_for_admins(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, inputs: Inputs, role: str
) -> None:
    as_role(browser, runtime, tenant, role)
    assert browser.get("/console/transformations/new").status_code == 403
    form = new_form("x", {"s": inputs.settlements}, "SELECT s.payout_id FROM s")
    for path in ("/console/transformations/new", "/console/transformations/new/preview"):
        assert browser.post(path, data=form, headers=SAME_ORIGIN).status_code == 403
    assert runtime.transformations.list_defined(workspace_id=tenant.workspace_id) == []
