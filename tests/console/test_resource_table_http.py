"""The resource table and its CSV export over HTTP (tally served by uvicorn on loopback,
both backends): the rows and their order exactly as the Data API gives them for the
same query, each of the seven filter forms, the column chooser, paging, a refused
filter's message, another workspace's resource, and the export of a filtered, sorted
view equal, row for row and value for value, to paging the Data API."""

from __future__ import annotations

import csv
import io
import re
import threading
from collections.abc import Sequence
from html import unescape
from pathlib import Path

import httpx
import pytest

from support import transformations
from support.console import make_user, sign_in
from support.data_api import api_rows
from support.databases import make_settings
from support.factories import LEDGER_CSV, Tenant, append, make_source, make_tenant
from support.servers import serve_app
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime
from tally.storage.resources import Resource

Params = Sequence[tuple[str, str]]
CELL = re.compile(r"<td([^>]*)>(.*?)</td>", re.S)
DASH = "\u2013"  # the en dash of "rows X-Y of N"
ROW = re.compile(r"<tr>\s*(<td.*?)</tr>", re.S)


@pytest.fixture
def browser(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> httpx.Client:
    """The API client signed in as a viewer of the tenant's workspace; no redirects
    followed (each test reads where it is sent)."""
    api.follow_redirects = False
    user = make_user(runtime, tenant.workspace_id, "viewer")
    assert sign_in(api, user.name).status_code == 303
    return api


def shown_rows(html: str) -> list[list[str]]:
    """The table's cells as text; a missing value as ''."""
    rows = []
    for row in ROW.findall(html):
        cells = []
        for classes, content in CELL.findall(row):
            cells.append("" if "null" in (classes or "") else unescape(content.strip()))
        rows.append(cells)
    return rows


def table_of(browser: httpx.Client, resource_id: int, params: Params = ()) -> httpx.Response:
    return browser.get(f"/console/resources/{resource_id}", params=tuple(params))


def test_the_rows_are_the_data_apis_with_exact_values(
    browser: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    page = table_of(browser, ledger.id)
    assert page.status_code == 200
    assert shown_rows(page.text) == api_rows(browser, tenant, ledger.id, [])
    assert '<td class="num">10.00</td>' in page.text  # digits as stored, right-aligned
    assert '<td class="num">-5.50</td>' in page.text
    assert "<td>true</td>" in page.text
    assert '<td class="null num" aria-label="no value">null</td>' in page.text
    assert f"rows 1{DASH}6 of 6" in page.text
    for fact in ("Source", "Data version", "Last change", f"/console/sources/{ledger.id}"):
        assert fact in page.text
    data_api = f"GET /api/v1/resources/{ledger.id}/data?page=1&amp;page_size=50"
    assert data_api in page.text


@pytest.mark.parametrize("ordering", ["amount", "-amount", "memo", "-posted_at", "-_row"])
def test_sorting_by_a_column_is_the_data_apis_order(
    browser: httpx.Client, tenant: Tenant, ledger: Resource, ordering: str
) -> None:
    page = table_of(browser, ledger.id, [("ordering", ordering)])
    assert page.status_code == 200
    assert shown_rows(page.text) == api_rows(browser, tenant, ledger.id, [("ordering", ordering)])


def test_a_header_sorts_ascending_then_descending(browser: httpx.Client, ledger: Resource) -> None:
    plain = table_of(browser, ledger.id).text
    assert f'href="/console/resources/{ledger.id}?ordering=amount"' in plain
    assert "aria-sort" not in plain
    ascending = table_of(browser, ledger.id, [("ordering", "amount"), ("page", "2")]).text
    assert re.search(r'<th scope="col" class="num" aria-sort="ascending">\s*<a href="[^"]*'
                     r'\?ordering=-amount">amount', ascending)  # fmt: skip
    descending = table_of(browser, ledger.id, [("ordering", "-amount")]).text
    assert 'aria-sort="descending"' in descending


SEVEN_FILTERS = [
    ("memo", "alpha"),
    ("memo__exact", "alpha"),
    ("amount__gt", "10.00"),
    ("amount__gte", "10.01"),
    ("txn_date__lt", "2024-02-01"),
    ("txn_date__lte", "2024-02-01"),
    ("id__in", "2,3,5"),
]


@pytest.mark.parametrize(("parameter", "value"), SEVEN_FILTERS)
def test_each_of_the_seven_filters_gives_the_data_apis_rows(
    browser: httpx.Client, tenant: Tenant, ledger: Resource, parameter: str, value: str
) -> None:
    params = [(parameter, value), ("ordering", "-amount")]
    page = table_of(browser, ledger.id, params)
    assert page.status_code == 200
    expected = api_rows(browser, tenant, ledger.id, params)
    assert 0 < len(expected) < 6
    assert shown_rows(page.text) == expected
    assert f"rows 1{DASH}{len(expected)} of {len(expected)}" in page.text


@pytest.mark.parametrize(
    ("operator", "expected"),
    [("", "amount=10.00"), ("exact", "amount__exact=10.00"), ("gte", "amount__gte=10.00")],
)
def test_the_filter_form_writes_the_data_apis_grammar(
    browser: httpx.Client, ledger: Resource, operator: str, expected: str
) -> None:
    answer = browser.get(
        f"/console/resources/{ledger.id}/view",
        params={
            "view": "ordering=-amount&page_size=25",
            "change": "filter",
            "column": "amount",
            "operator": operator,
            "value": "10.00",
        },
    )
    assert answer.status_code == 303
    # Filters first, then fields and ordering; back to page 1, the page size kept.
    assert answer.headers["location"] == (
        f"/console/resources/{ledger.id}?{expected}&ordering=-amount&page_size=25"
    )


def test_a_filter_is_removed_by_its_link(browser: httpx.Client, ledger: Resource) -> None:
    page = table_of(browser, ledger.id, [("memo", "alpha"), ("id__in", "1,6"), ("page", "1")])
    assert f'href="/console/resources/{ledger.id}?id__in=1%2C6"' in page.text
    assert f'href="/console/resources/{ledger.id}?memo=alpha"' in page.text


def test_the_column_chooser_sets_fields(browser: httpx.Client, ledger: Resource) -> None:
    chosen = browser.get(
        f"/console/resources/{ledger.id}/view",
        params=[
            ("view", "memo=alpha"),
            ("change", "columns"),
            ("field", "memo"),
            ("field", "amount"),
            ("field", "_row"),
            *[("every", c) for c in ("id", "amount", "memo")],
        ],
    )
    assert chosen.headers["location"] == (
        f"/console/resources/{ledger.id}?memo=alpha&fields=memo%2Camount%2C_row"
    )
    page = table_of(browser, ledger.id, [("memo", "alpha"), ("fields", "memo,amount,_row")])
    assert shown_rows(page.text) == [["alpha", "10.00", "1"], ["alpha", "20.25", "6"]]
    assert re.findall(r'<th scope="col"[^>]*>\s*<a [^>]*>([^<]*)<', page.text) == [
        "memo",
        "amount",
        "_row",
    ]
    every = browser.get(
        f"/console/resources/{ledger.id}/view",
        params=[("view", "fields=memo"), ("change", "columns"), ("field", "id"), ("every", "id")],
    )
    assert every.headers["location"] == f"/console/resources/{ledger.id}"  # the default


def test_paging_says_which_rows_of_how_many(
    browser: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    params = [("ordering", "id"), ("page", "2"), ("page_size", "4")]
    page = table_of(browser, ledger.id, params)
    assert f"rows 5{DASH}6 of 6, page 2 of 2" in page.text
    expected = api_rows(browser, tenant, ledger.id, [("ordering", "id")])[4:]
    assert shown_rows(page.text) == expected
    assert 'rel="prev"' in page.text
    assert 'rel="next"' not in page.text
    first = table_of(browser, ledger.id, [("page_size", "4")])
    assert f"rows 1{DASH}4 of 6, page 1 of 2" in first.text
    assert f'href="/console/resources/{ledger.id}?page=2&amp;page_size=4" rel="next"' in first.text
    beyond = table_of(browser, ledger.id, [("page", "9")])
    assert beyond.status_code == 200
    assert "No row matches this view." in beyond.text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ([("nope", "1")], "Filter field 'nope' is not a valid column for this resource."),
        ([("amount__like", "1")], "Operator 'like' is not supported."),
        ([("amount", "ten")], "The requested filters or ordering could not be applied."),
        ([("fields", "id,nope")], "Field 'nope' is not a valid column for this resource."),
        ([("ordering", "-nope")], "Ordering field 'nope' is not a valid column for this resource."),
        ([("page", "two")], "page must be a whole number, at least 1."),
        ([("page_size", "0")], "page_size must be a whole number, at least 1."),
    ],
)
def test_a_refused_view_shows_the_data_apis_message_beside_the_filters(
    browser: httpx.Client, ledger: Resource, params: Params, message: str
) -> None:
    page = table_of(browser, ledger.id, params)
    assert page.status_code == 400
    assert (
        f'<p class="error" id="view-error" role="alert">{message}</p>'.replace("'", "&#39;")
        in page.text
    )
    assert "Remove" in page.text or params[0][0] in ("fields", "ordering", "page", "page_size")
    assert "<tbody>" not in page.text
    export = browser.get(f"/console/resources/{ledger.id}/export.csv", params=tuple(params))
    assert (export.status_code, export.text) == (400, message)


def test_another_workspaces_resource_is_the_missing_page(
    browser: httpx.Client, runtime: Runtime, ledger: Resource
) -> None:
    theirs = make_source(runtime.engine, make_tenant(runtime.engine), LEDGER_CSV)
    answers = []
    for resource_id in (theirs.id, 2_000_000_000):
        for suffix in ("", "/export.csv"):
            response = browser.get(f"/console/resources/{resource_id}{suffix}")
            answers.append((response.status_code, response.text))
    assert {status for status, _ in answers} == {404}
    assert len({text for _, text in answers}) == 1
    assert "nope" not in answers[0][1]


def read_csv(response: httpx.Response) -> list[list[str]]:
    assert response.status_code == 200, response.text
    return list(csv.reader(io.StringIO(response.content.decode("utf-8"), newline="")))


@pytest.mark.parametrize(
    "params",
    [
        [],
        [("amount__gte", "10.00"), ("ordering", "-amount")],
        [("memo__in", "alpha,gamma,"), ("ordering", "-txn_date"), ("fields", "memo,id,_row")],
        [("flag", "true"), ("ordering", "posted_at"), ("page", "2"), ("page_size", "1")],
    ],
)
def test_the_export_is_the_whole_view_as_the_data_api_pages_it(
    browser: httpx.Client, tenant: Tenant, ledger: Resource, params: Params
) -> None:
    export = browser.get(f"/console/resources/{ledger.id}/export.csv", params=tuple(params))
    unpaged = [(k, v) for k, v in params if k not in ("page", "page_size")]
    header, *rows = read_csv(export)
    fields = dict(params).get("fields")
    assert header == (fields.split(",") if fields else list(LEDGER_COLUMNS))
    assert rows == api_rows(browser, tenant, ledger.id, unpaged)
    assert export.headers["content-type"] == "text/csv; charset=utf-8"
    assert b"\r\n" in export.content  # RFC 4180 line ends


LEDGER_COLUMNS = ["id", "amount", "txn_date", "posted_at", "flag", "memo", "bank.amount", "Amount"]


def test_the_export_keeps_hostile_and_awkward_values_exact(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    name = 'Bank "EUR"/../<x> statement;'
    content = (
        "ref,amount,note\n"
        '=HYPERLINK("http://x"),-0.0001,"line one\nline two"\n'
        '+1,12345678901234.5678,"a, ""quoted"" value"\n'
        "<script>alert(1)</script>,,\n"
    )
    source = make_source(runtime.engine, tenant, content, name=name)
    export = browser.get(f"/console/resources/{source.id}/export.csv")
    disposition = export.headers["content-disposition"]
    assert disposition == (
        'attachment; filename="Bank _EUR_.._x_ statement_.csv"; '
        "filename*=UTF-8''Bank%20%22EUR%22_.._%3Cx%3E%20statement%3B.csv"
    )
    assert read_csv(export) == [
        ["ref", "amount", "note"],
        ['=HYPERLINK("http://x")', "-0.0001", "line one\nline two"],
        ["+1", "12345678901234.5678", 'a, "quoted" value'],
        ["<script>alert(1)</script>", "", ""],
    ]
    page = table_of(browser, source.id)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "<script>alert" not in page.text


def many_rows(count: int, first_id: int = 1) -> str:
    """A ledger of `count` rows: amounts with many ties and some missing, a flag on
    every other row, dates over a year (rows made here, fast, not by a generator)."""
    lines = ["id,amount,booked_on,flag,memo"]
    for n in range(first_id, first_id + count):
        amount = "" if n % 97 == 0 else f"{(n * 7919) % 50000 - 25000}.{n % 100:02d}"
        lines.append(
            f"{n},{amount},2025-{n % 12 + 1:02d}-{n % 28 + 1:02d},{n % 2 == 0},m{n % 1000}"
        )
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_a_100k_row_view_exports_as_the_data_api_pages_it(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """Half of 100,000 rows, sorted by an amount with ties and missing values (so the
    export's chunks start after keys that repeat, and missing values come last)."""
    source = make_source(runtime.engine, tenant, many_rows(100_000))
    params = [("flag", "true"), ("ordering", "-amount")]
    export = browser.get(f"/console/resources/{source.id}/export.csv", params=params)
    header, *rows = read_csv(export)
    assert header == ["id", "amount", "booked_on", "flag", "memo"]
    expected = api_rows(browser, tenant, source.id, params)
    assert len(expected) == 50_000
    assert rows == expected
    sorted_by_id = [("amount__lt", "0"), ("ordering", "id"), ("fields", "id,amount")]
    _, *rows = read_csv(
        browser.get(f"/console/resources/{source.id}/export.csv", params=sorted_by_id)
    )
    assert rows == api_rows(browser, tenant, source.id, sorted_by_id)


@pytest.mark.slow
def test_a_file_landing_mid_export_is_not_in_it(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    """The export reads one snapshot: rows appended after its first chunk was sent are
    not in it, and their load is not held up by it."""
    source = make_source(runtime.engine, tenant, many_rows(100_000))
    url = f"/console/resources/{source.id}/export.csv"
    with browser.stream("GET", url, params=[("ordering", "id")]) as export:
        chunks = export.iter_bytes()
        received = [next(chunks)]
        appending = threading.Thread(
            target=append, args=(runtime, source.id, many_rows(1_000, first_id=100_001))
        )
        appending.start()
        appending.join(timeout=120)
        assert not appending.is_alive()
        received += list(chunks)
    rows = list(csv.reader(io.StringIO(b"".join(received).decode(), newline="")))
    assert [row[0] for row in rows[1:]] == [str(n) for n in range(1, 100_001)]
    after = browser.get(url, params=[("ordering", "-id"), ("fields", "id")])
    assert read_csv(after)[1] == ["101000"]


def test_with_query_processes_the_page_is_read_in_one(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """`tally serve`'s default: the page comes from a query process (pickled across),
    the same as with the API process's own threads (the other tests)."""
    settings = make_settings(request, backend, tmp_path / "home", query_processes=1)
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        ledger = make_source(runtime.engine, tenant, LEDGER_CSV)
        user = make_user(runtime, tenant.workspace_id, "viewer")
        app = create_app(settings, runtime)
        with (
            serve_app(app, lifespan=True) as url,
            httpx.Client(base_url=url, timeout=60) as client,
        ):
            sign_in(client, user.name)
            params = [("amount__gte", "10.00"), ("ordering", "-amount"), ("fields", "id,amount")]
            page = table_of(client, ledger.id, params)
            assert shown_rows(page.text) == [["6", "20.25"], ["2", "10.01"], ["4", "10.00"],
                                             ["1", "10.00"]]  # fmt: skip
            assert table_of(client, ledger.id, [("nope", "1")]).status_code == 400
    finally:
        runtime.close()


def test_a_transformations_output_is_a_table_like_any_resource(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    given = transformations.make_inputs(runtime.engine, tenant)
    created = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformations.transformation(given)
    )
    transformations.run(runtime, created.id)
    out = transformations.output(runtime, created.id)
    params = [("ordering", "-amount")]
    page = table_of(browser, out.id, params)
    assert page.status_code == 200
    assert shown_rows(page.text) == api_rows(browser, tenant, out.id, params)
    assert f'href="/console/transformations/{created.id}"' in page.text
    assert "1000000.001" in page.text  # the sum's exact digits
    _, *rows = read_csv(browser.get(f"/console/resources/{out.id}/export.csv", params=params))
    assert rows == api_rows(browser, tenant, out.id, params)
