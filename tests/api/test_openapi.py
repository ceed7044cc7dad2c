"""GET /health and GET /api/v1/openapi.json: a real OpenAPI 3 document of both APIs.

Health and the unauthenticated document run on both backends through the `api` fixture;
the document's contents, which do not depend on the backend, are fetched once per module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import pytest
from pydantic import BaseModel

# The OpenAPI 3.1 meta-schema, as shipped with schemathesis (a dev dependency).
from schemathesis.specs.openapi.definitions import OPENAPI_31

from support.databases import make_settings
from support.servers import serve_app
from tally.api.app import create_app
from tally.api.v2.bodies import json_request_body
from tally.runtime import build_runtime

DATA_PATH = "/api/v1/resources/{resource_id}/data"
FILTER_FORMS = ("__exact", "__gt", "__gte", "__lt", "__lte", "__in")


@pytest.fixture(scope="module")
def document(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The document as served over HTTP, fetched once: it does not depend on the backend."""
    settings = make_settings(request, "sqlite", tmp_path_factory.mktemp("openapi"))
    runtime = build_runtime(settings)
    try:
        with serve_app(create_app(settings, runtime)) as url, httpx.Client(base_url=url) as api:
            response = api.get("/api/v1/openapi.json")
    finally:
        runtime.close()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    parsed: dict[str, Any] = response.json()
    return parsed


def data_operation(document: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = document["paths"][DATA_PATH]["get"]
    return operation


def parameters(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["in"], p["name"]): p for p in data_operation(document)["parameters"]}


def test_health_and_openapi_need_no_authentication(api: httpx.Client) -> None:
    response = api.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert api.get("/api/v1/openapi.json").status_code == 200
    assert api.get("/api/v1/openapi.json", headers={"X-API-Key": "nonsense"}).status_code == 200


def test_openapi_document_is_valid_openapi_3(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    errors = [str(e) for e in jsonschema_rs.Draft202012Validator(OPENAPI_31).iter_errors(document)]
    assert errors == []
    assert {"title", "version"} <= set(document["info"])


def objects_in(node: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in `node`, itself included, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from objects_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from objects_in(value)


def test_every_reference_in_the_document_resolves(document: dict[str, Any]) -> None:
    refs = [
        node["$ref"]
        for part in (document["paths"], document.get("components", {}))
        for node in objects_in(part)
        if isinstance(node.get("$ref"), str)
    ]
    schemas = document["components"]["schemas"]
    assert refs
    dangling = sorted({r for r in refs if r.removeprefix("#/components/schemas/") not in schemas})
    assert not dangling, f"$refs to schemas missing from components: {dangling}"


def test_openapi_lists_the_public_paths(document: dict[str, Any]) -> None:
    assert set(document["paths"]["/health"]) == {"get"}
    assert set(document["paths"][DATA_PATH]) == {"get"}


def test_data_endpoint_documents_headers_and_reserved_parameters(
    document: dict[str, Any],
) -> None:
    params = parameters(document)
    assert params[("path", "resource_id")]["schema"]["type"] == "integer"
    assert params[("path", "resource_id")]["required"] is True
    assert params[("header", "workspace_id")]["required"] is True
    assert ("header", "X-API-Key") in params
    assert params[("query", "page")]["schema"]["default"] == 1
    assert params[("query", "page")]["schema"]["minimum"] == 1
    assert params[("query", "page_size")]["schema"]["default"] == 1000
    assert params[("query", "page_size")]["schema"]["minimum"] == 1
    assert "10000" in params[("query", "page_size")]["description"]
    assert ("query", "fields") in params
    assert ("query", "ordering") in params
    assert ("query", "workspace_id") not in params


def test_data_endpoint_documents_the_filter_forms(document: dict[str, Any]) -> None:
    filters = parameters(document)[("query", "filters")]
    assert filters["schema"]["type"] == "object"
    assert filters["style"] == "form"
    assert filters["explode"] is True
    described = filters["description"] + data_operation(document)["description"]
    assert [form for form in FILTER_FORMS if form not in described] == []
    assert "AND" in data_operation(document)["description"]


def test_data_endpoint_documents_every_response(document: dict[str, Any]) -> None:
    responses = data_operation(document)["responses"]
    assert set(responses) == {"200", "400", "401", "403", "404", "422", "503"}
    ok = responses["200"]["content"]["application/json"]["schema"]
    page = document["components"]["schemas"][ok["$ref"].rsplit("/", 1)[1]]
    assert set(page["properties"]) == {"data", "meta"}
    meta = document["components"]["schemas"]["PageMeta"]["properties"]
    assert set(meta) == {"page", "page_size", "returned_count", "total_count", "total_pages"}
    for status in ("400", "401", "403", "404", "503"):
        schema = responses[status]["content"]["application/json"]["schema"]
        error = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        assert error["properties"]["detail"]["type"] == "string", status
    details = {
        "400": "Operator '<op>' is not supported.",
        "401": "Could not validate credentials",
        "403": "Resource does not belong to the specified workspace",
        "404": "Workspace not found",
        "503": "Data platform is temporarily unavailable. Please try again later.",
    }
    assert [s for s, text in details.items() if text not in responses[s]["description"]] == []


INGESTION_OPERATIONS = [
    ("post", "/api/v2/webhooks"),
    ("post", "/api/v2/sources"),
    ("post", "/api/v2/sources/{source_id}/feed-source"),
    ("get", "/api/v2/sources/{source_id}/files"),
    ("get", "/api/v2/sources/{source_id}/files/{file_id}"),
]


@pytest.mark.parametrize(("method", "path"), INGESTION_OPERATIONS)
def test_ingestion_credentials_are_required_headers(
    document: dict[str, Any], method: str, path: str
) -> None:
    operation = document["paths"][path][method]
    headers = {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}
    credentials = ("x-api-key", "x-svc-workspace", "x-svc-account")
    assert [name for name in credentials if not headers[name]["required"]] == []
    assert "403" in operation["responses"]  # what a missing one answers, as a wrong one


def test_notification_needs_no_credentials(document: dict[str, Any]) -> None:
    operation = document["paths"]["/api/v2/webhooks/{webhook_id}/feed-source"]["post"]
    assert [p["name"] for p in operation["parameters"] if p["in"] == "header"] == [
        "Idempotency-Key"
    ]
    assert operation["requestBody"]["required"] is True


def test_every_error_response_has_its_versions_shape(document: dict[str, Any]) -> None:
    """v1: {"detail": "..."} (422: FastAPI's list); v2: {"errors": [{field, message}]}."""
    schemas = document["components"]["schemas"]
    shapes: dict[tuple[str, bool], set[str]] = {}
    for path, operations in document["paths"].items():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    key = (path.split("/")[2], status == "422")
                    shapes.setdefault(key, set()).add(ref.rsplit("/", 1)[1])
    assert shapes == {
        ("v1", False): {"DataApiErrorResponse"},
        ("v1", True): {"DataApiValidationErrorResponse"},
        ("v2", False): {"IngestionErrorResponse"},
        ("v2", True): {"IngestionErrorResponse"},
    }
    problem = schemas["IngestionProblem"]
    assert set(problem["required"]) == {"field", "message"}
    assert schemas["IngestionErrorResponse"]["required"] == ["errors"]


def test_the_spec_errors_of_webhook_registration_are_documented(document: dict[str, Any]) -> None:
    responses = document["paths"]["/api/v2/webhooks"]["post"]["responses"]
    assert {"400", "403", "422", "500", "502"} <= set(responses)
    assert "Retry" in responses["500"]["description"]


def test_every_model_is_one_component_named_by_its_title(document: dict[str, Any]) -> None:
    """Client generators name a model by its title: two models of one title clash, and
    one described inline (not a component) is made anew, and named anew, where it is used."""
    schemas = document["components"]["schemas"]
    assert {name: s.get("title") for name, s in schemas.items() if s.get("title") != name} == {}
    inline = [
        n["title"] for n in objects_in(document["paths"]) if "properties" in n and "title" in n
    ]
    assert inline == []


def test_operation_ids_are_the_route_names(document: dict[str, Any]) -> None:
    """What a generated client names its functions: `get_transformation`."""
    ids = [
        op["operationId"] for operations in document["paths"].values() for op in operations.values()
    ]
    assert len(ids) == len(set(ids))
    assert {"create_reconciliation", "get_transformation", "read_resource_data"} <= set(ids)


def test_a_second_request_model_of_a_components_name_is_refused() -> None:
    """Its $ref would name the first one's component."""

    class WebhookCreateBody(BaseModel):
        other: int

    with pytest.raises(TypeError, match="two request models are named WebhookCreateBody"):
        json_request_body(WebhookCreateBody)
