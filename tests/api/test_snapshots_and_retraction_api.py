"""Snapshot sources and files taken back over real HTTP (issue #32 points 5 and 7):
`mode` on POST /api/v2/sources and /webhooks, DELETE /api/v2/sources/{id}/files/{file_id}
with its 200, 404, 409 and 403, the actor it records, and the OpenAPI document."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx

from support.factories import Tenant, make_tenant, run_pipeline
from tally.runtime import Runtime

CSV = {"content-type": "text/csv"}


def create(api: httpx.Client, tenant: Tenant, body: dict[str, Any]) -> httpx.Response:
    return api.post("/api/v2/sources", json=body, headers=tenant.v2_headers)


def deliver(api: httpx.Client, runtime: Runtime, tenant: Tenant, source: int, csv: str) -> int:
    response = api.post(
        f"/api/v2/sources/{source}/feed-source",
        content=csv.encode(),
        headers={**tenant.v2_headers, **CSV},
    )
    assert response.status_code == 202, response.text
    run_pipeline(runtime)
    file_id: int = response.json()["file_id"]
    return file_id


def rows(api: httpx.Client, tenant: Tenant, source: int) -> list[Any]:
    response = api.get(
        f"/api/v1/resources/{source}/data?fields=id,_file_id", headers=tenant.headers
    )
    assert response.status_code == 200, response.text
    found: list[Any] = response.json()["data"]
    return found


def test_a_replace_source_holds_the_last_snapshot_only(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    created = create(api, ingestion_tenant, {"name": "erp ledger", "mode": "replace"})
    assert created.status_code == 201, created.text
    source = created.json()["id"]
    deliver(api, runtime, ingestion_tenant, source, "id\n1\n2\n3\n")
    last = deliver(api, runtime, ingestion_tenant, source, "id\n1\n2\n3\n4\n")
    assert rows(api, ingestion_tenant, source) == [{"id": n, "_file_id": last} for n in range(1, 5)]


def test_a_mode_other_than_append_or_replace_is_a_422_naming_it(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    for path, body in [
        ("/api/v2/sources", {"name": "s", "mode": "merge"}),
        ("/api/v2/webhooks", {"name": "w", "mode": "merge", "webhook": {}}),
    ]:
        response = api.post(path, json=body, headers=ingestion_tenant.v2_headers)
        assert response.status_code == 422, response.text
        assert [e["field"] for e in response.json()["errors"]] == ["mode"]


def test_delete_takes_the_file_back_and_says_who(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = create(api, ingestion_tenant, {"name": "statements"}).json()["id"]
    first = deliver(api, runtime, ingestion_tenant, source, "id\n1\n2\n")
    second = deliver(api, runtime, ingestion_tenant, source, "id\n3\n")
    url = f"/api/v2/sources/{source}/files/{first}"

    response = api.delete(url, headers=ingestion_tenant.v2_headers)

    assert response.status_code == 200, response.text
    body = response.json()
    fingerprint = hashlib.sha256(ingestion_tenant.key.encode()).hexdigest()[:12]
    assert (body["id"], body["status"]) == (first, "retracted")
    assert body["retracted_by"] == f"api key sha256:{fingerprint}"
    assert body["retracted_at"] is not None
    assert body["rows"] == 2  # what it had loaded
    assert rows(api, ingestion_tenant, source) == [{"id": 3, "_file_id": second}]
    shown = api.get(url, headers=ingestion_tenant.v2_headers).json()
    assert shown == body
    again = api.delete(url, headers=ingestion_tenant.v2_headers)
    assert (again.status_code, again.json()) == (200, body)


def test_delete_refuses_what_is_not_a_delivered_file_of_the_workspace(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = create(
        api, ingestion_tenant, {"name": "typed", "columns": [{"name": "id", "type": "integer"}]}
    ).json()["id"]
    failed = deliver(api, runtime, ingestion_tenant, source, "id\nx\n")
    delivered = deliver(api, runtime, ingestion_tenant, source, "id\n1\n")
    headers = ingestion_tenant.v2_headers

    conflict = api.delete(f"/api/v2/sources/{source}/files/{failed}", headers=headers)
    assert conflict.status_code == 409, conflict.text
    assert conflict.json()["errors"] == [
        {
            "field": "file_id",
            "message": f"file {failed} is failed: only a delivered file can be taken back",
        }
    ]
    missing = api.delete(f"/api/v2/sources/{source}/files/{delivered + 99}", headers=headers)
    assert missing.status_code == 404
    other = make_tenant(runtime.engine, ingestion=True)
    foreign = api.delete(f"/api/v2/sources/{source}/files/{delivered}", headers=other.v2_headers)
    assert foreign.status_code == 404
    unkeyed = api.delete(
        f"/api/v2/sources/{source}/files/{delivered}", headers={**headers, "x-api-key": "no"}
    )
    assert unkeyed.status_code == 403
    assert rows(api, ingestion_tenant, source) == [{"id": 1, "_file_id": delivered}]


def test_the_openapi_document_describes_the_route_and_the_fields(api: httpx.Client) -> None:
    document = api.get("/api/v1/openapi.json").json()
    route = document["paths"]["/api/v2/sources/{source_id}/files/{file_id}"]
    assert set(route) == {"get", "delete"}
    assert {"200", "404", "409", "403"} <= set(route["delete"]["responses"])
    schemas = document["components"]["schemas"]
    assert {"retracted_at", "retracted_by"} <= set(schemas["FileStatusResponse"]["properties"])
    mode = schemas["SourceCreateBody"]["properties"]["mode"]
    assert mode["enum"] == ["append", "replace"]
    assert mode["default"] == "append"
