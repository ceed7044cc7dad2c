"""GET /api/v1/resources/{id}/data over HTTP, and the checked body of a 200 answer.

The Data API tests (tests/api/, the CLI's) read pages through these; reads through the
query service without HTTP are in support/factories.py (`read_body`, `read_data`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import httpx

from support.factories import Tenant

Params = Sequence[tuple[str, str]]


def get_data(
    api: httpx.Client, tenant: Tenant, resource_id: int, params: Params = ()
) -> httpx.Response:
    """One page of a resource, read with the tenant's key and workspace."""
    return get_data_as(api, tenant.headers, resource_id, params)


def get_data_as(
    api: httpx.Client, headers: dict[str, str], resource_id: int | str, params: Params = ()
) -> httpx.Response:
    """One page of a resource, read with exactly these headers (missing, wrong, foreign)."""
    return api.get(f"/api/v1/resources/{resource_id}/data", params=tuple(params), headers=headers)


def ok_body(response: httpx.Response) -> dict[str, Any]:
    """The body of a 200 answer; JSON numbers with a '.' as exact Decimals."""
    assert response.status_code == 200, response.text
    body: dict[str, Any] = json.loads(response.content, parse_float=Decimal)
    return body


def texts(value: Any) -> str:
    """A Data API JSON value as the console and the CSV show it."""
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


def api_rows(api: httpx.Client, tenant: Tenant, resource_id: int, params: Params) -> list[Any]:
    """Every row of the view, paging the Data API (10,000 a page), each as its values'
    texts (numbers parsed as their digits, never floats)."""
    rows: list[Any] = []
    page = 1
    while True:
        query = [*params, ("page", str(page)), ("page_size", "10000")]
        response = get_data(api, tenant, resource_id, query)
        assert response.status_code == 200, response.text
        body = json.loads(response.content, parse_float=str, parse_int=str)
        rows += [[texts(v) for v in row.values()] for row in body["data"]]
        if body["meta"]["returned_count"] < body["meta"]["page_size"]:
            return rows
        page += 1
