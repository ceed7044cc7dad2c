"""A first end-to-end read on both backends."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx

from support.factories import make_source, make_tenant
from tally.runtime import Runtime

CSV = "id,amount,when\n1,12.50,2024-01-05\n2,-0.75,2024-01-06\n3,12345678901234567.89,\n"


def test_rows_come_back_exact_and_in_insertion_order(runtime: Runtime, api: httpx.Client) -> None:
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    response = api.get(f"/api/v1/resources/{source.id}/data", headers=tenant.headers)
    assert response.status_code == 200
    body = json.loads(response.content, parse_float=Decimal)
    assert body["data"] == [
        {"id": 1, "amount": Decimal("12.50"), "when": "2024-01-05"},
        {"id": 2, "amount": Decimal("-0.75"), "when": "2024-01-06"},
        {"id": 3, "amount": Decimal("12345678901234567.89"), "when": None},
    ]
    assert b"12345678901234567.89" in response.content
    assert body["meta"] == {
        "page": 1,
        "page_size": 1000,
        "returned_count": 3,
        "total_count": 3,
        "total_pages": 1,
    }
