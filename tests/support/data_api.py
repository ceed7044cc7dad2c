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
