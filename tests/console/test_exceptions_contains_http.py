"""The Exceptions view's text filter over HTTP, both backends: part of a reference, in any
case, finds every open row of the side whose reference contains it (the Data API's rows
for the side's query, filtered in Python), `%`, `_`, `\\` and quotes taken as typed;
counted and paged alike; the side's export is the same rows; and the public Data API
still refuses `__contains` as its spec says."""

from __future__ import annotations

import csv
import html as html_text
import io
import re
from typing import Any

import httpx
import pytest
from markupsafe import escape
from test_workbench_exceptions_http import data_api, data_api_query, signed_in, table_rows, view

from support.exceptions import OPEN, SEARCHABLE_BANK_CSV, reconciled
from support.factories import Tenant
from tally.runtime import Runtime


@pytest.fixture
def analyst(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> httpx.Client:
    return signed_in(api, runtime, tenant, "analyst")


def open_bank_rows(
    client: httpx.Client, tenant: Tenant, output_id: int, page: str
) -> list[dict[str, Any]]:
    """Every open bank row in the view's order: the side's Data API query, unpaged."""
    query = [(k, v) for k, v in data_api_query(page, "left") if k not in ("page", "page_size")]
    rows: list[dict[str, Any]] = data_api(
        client, tenant, output_id, [*query, ("page_size", "1000")]
    )["data"]
    return rows


def containing(rows: list[dict[str, Any]], text: str) -> list[int]:
    """The plain reading: the reference, lowered, holds the text, lowered."""
    return [
        r["bank._row"]
        for r in rows
        if r["bank.reference"] is not None and text.lower() in r["bank.reference"].lower()
    ]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("INV-20", ["INV-2024-001", "inv-2031"]),
        ("acme", ["ACME Ltd", "acme-2"]),
        ("MÜLLER", ["Müller GmbH"]),
        ("50%_", ["50%_off"]),
        ("\\", ["back\\slash"]),
        ("'b", ["O'Brien"]),
        ("b-", ["B-1", "B-2", "B-3", "B-4"]),
        ("_", ["50%_off"]),
        ("zzz", []),
    ],
)
def test_part_of_a_reference_in_any_case_finds_every_open_row_containing_it(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant, text: str, found: list[str]
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant, bank=SEARCHABLE_BANK_CSV)
    everything = open_bank_rows(analyst, tenant, output_id, view(analyst, reconciliation_id).text)
    answer = view(analyst, reconciliation_id, left_text=text, right_sort="-amount")
    assert answer.status_code == 200
    page = answer.text
    expected = containing(everything, text)
    assert table_rows(page, "left") == expected
    by_row = {r["bank._row"]: r["bank.reference"] for r in everything}
    assert sorted(by_row[r] for r in expected) == sorted(found)
    shown = f"bank: rows 1\u2013{len(expected)} of {len(expected)}" if expected else "bank: no rows"
    assert shown in page
    assert "contains \u201c" in page  # the Data API line names the console's own search
    assert sorted(table_rows(page, "right")) == OPEN["right"]  # the other side untouched
    assert f'value="{escape(text)}"' in page  # the box keeps the text


def test_counts_and_pages_agree_with_the_rows(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    many = SEARCHABLE_BANK_CSV + "".join(
        f"M-{n},{n}.01,2024-03-{1 + n % 28:02d},many\n" for n in range(1, 61)
    )
    reconciliation_id, output_id = reconciled(runtime, tenant, bank=many)
    everything = open_bank_rows(analyst, tenant, output_id, view(analyst, reconciliation_id).text)
    expected = containing(everything, "m-")
    assert len(expected) == 60
    first = view(analyst, reconciliation_id, left_text="m-").text
    second = view(analyst, reconciliation_id, left_text="m-", left_page="2").text
    assert "bank: rows 1\u201350 of 60" in first
    assert "bank: rows 51\u201360 of 60" in second
    assert table_rows(first, "left") + table_rows(second, "left") == expected
    # the links keep the text: the next page's is the second page
    assert "left_page=2&amp;left_text=m-" in first


def test_the_sides_export_is_the_searched_view(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant, bank=SEARCHABLE_BANK_CSV)
    everything = open_bank_rows(analyst, tenant, output_id, view(analyst, reconciliation_id).text)
    page = view(analyst, reconciliation_id, left_text="inv", left_sort="-amount").text
    links = re.findall(r'href="(/console/reconciliations/\d+/exceptions/export\.csv\?[^"]*)"', page)
    assert len(links) == 2
    exported = analyst.get(html_text.unescape(links[0]))
    assert exported.status_code == 200
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert sorted(int(r["bank._row"]) for r in rows) == sorted(containing(everything, "inv"))
    assert [r["bank.reference"] for r in rows] == ["INV-19", "inv-2031", "INV-2024-001"]
    refused = analyst.get(html_text.unescape(links[0]).replace("side=left", "side=middle"))
    assert refused.status_code == 400


def test_the_data_api_still_refuses_contains_as_its_spec_says(
    analyst: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    reconciliation_id, output_id = reconciled(runtime, tenant, bank=SEARCHABLE_BANK_CSV)
    assert table_rows(view(analyst, reconciliation_id, left_text="acme").text, "left")
    refused = analyst.get(
        f"/api/v1/resources/{output_id}/data",
        params={"bank.reference__contains": "acme"},
        headers=tenant.headers,
    )
    assert refused.status_code == 400
    assert refused.json() == {"detail": "Operator 'contains' is not supported."}
