"""The `encoding` of a source over HTTP (issue #14, point 3), on both backends: declared
in the bodies of POST /api/v2/webhooks and POST /api/v2/sources, refused with 422 naming
the field when unknown, documented in the OpenAPI document, and used by every load of
the source: uploads and webhook downloads, carried through the real pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.factories import Tenant, run_pipeline
from support.servers import file_server_app, serve_app
from tally.core.encodings import canonical_encoding
from tally.runtime import Runtime
from tally.settings import Settings

MIXED = b"id,name\n1,caf\xc3\xa9\n2,caf\xe9\n"  # the file: UTF-8, then one Latin-1 byte
CP1252_CSV = "id,memo,amount\n1,€ 5 \u2013 Œuvre,1.50\n2,caf\xe9,-2\n".encode("cp1252")
CP1252_ROWS = [
    {"id": 1, "memo": "€ 5 \u2013 Œuvre", "amount": Decimal("1.50")},
    {"id": 2, "memo": "café", "amount": Decimal("-2.00")},
]
LATIN1_CSV = "Konto;Betrag\nMüller;-0.05\nGärtner;12\n".encode("latin-1")
LATIN1_ROWS = [
    {"Konto": "Müller", "Betrag": Decimal("-0.05")},
    {"Konto": "Gärtner", "Betrag": Decimal("12.00")},
]
UTF16_CSV = "id,name\n1,日本\n2,Łódź\n".encode("utf-16")
README = Path(__file__).parents[2] / "README.md"
FILES = {"latin1.csv": LATIN1_CSV, "mixed.csv": MIXED, "utf16.csv": UTF16_CSV}


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    """Downloads may reach the loopback file server."""
    return make_settings(request, backend, tmp_path / "home", fetch_allow="127.0.0.0/8")


@pytest.fixture(scope="module")
def file_server() -> Iterator[str]:
    with serve_app(file_server_app(FILES)) as url:
        yield url


def rows_of(api: httpx.Client, tenant: Tenant, source_id: int) -> list[Any]:
    response = api.get(f"/api/v1/resources/{source_id}/data", headers=tenant.headers)
    assert response.status_code == 200, response.text
    rows: list[Any] = json.loads(response.content, parse_float=Decimal)["data"]
    return rows


def create_source(api: httpx.Client, tenant: Tenant, **body: Any) -> httpx.Response:
    return api.post("/api/v2/sources", json={"name": "uploads", **body}, headers=tenant.v2_headers)


def register(api: httpx.Client, tenant: Tenant, **body: Any) -> httpx.Response:
    payload = {"name": "bank", "webhook": {}, **body}
    return api.post("/api/v2/webhooks", json=payload, headers=tenant.v2_headers)


def upload(api: httpx.Client, tenant: Tenant, source_id: int, content: bytes) -> int:
    response = api.post(
        f"/api/v2/sources/{source_id}/feed-source",
        content=content,
        headers={**tenant.v2_headers, "content-type": "text/csv"},
    )
    assert response.status_code == 202, response.text
    file_id: int = response.json()["file_id"]
    return file_id


def notify(api: httpx.Client, webhook_id: str, url: str) -> int:
    response = api.post(f"/api/v2/webhooks/{webhook_id}/feed-source", json={"file_url": url})
    assert response.status_code == 200, response.text
    return int(response.headers["X-Tally-File-Id"])


def file_of(api: httpx.Client, tenant: Tenant, source_id: int, file_id: int) -> Any:
    url = f"/api/v2/sources/{source_id}/files/{file_id}"
    response = api.get(url, headers=tenant.v2_headers)
    assert response.status_code == 200, response.text
    return response.json()


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == ["encoding"]
    assert "Extra inputs" not in response.text  # refused as a value, not as a field


# --- POST /api/v2/sources ------------------------------------------------------------------


def test_upload_to_a_cp1252_source_loads_exactly(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    created = create_source(api, ingestion_tenant, encoding="cp1252")
    assert created.status_code == 201, created.text
    source_id = created.json()["id"]
    file_id = upload(api, ingestion_tenant, source_id, CP1252_CSV)
    run_pipeline(runtime)
    assert file_of(api, ingestion_tenant, source_id, file_id)["status"] == "delivered"
    assert rows_of(api, ingestion_tenant, source_id) == CP1252_ROWS


def test_upload_of_mixed_bytes_to_a_default_source_fails_naming_line_and_offset(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source_id = create_source(api, ingestion_tenant).json()["id"]
    file_id = upload(api, ingestion_tenant, source_id, MIXED)
    run_pipeline(runtime)
    file = file_of(api, ingestion_tenant, source_id, file_id)
    assert file["status"] == "failed"
    assert file["error"].startswith("line 3:")
    assert "byte offset 21" in file["error"]
    assert "UTF-8" in file["error"]


def test_json_rows_to_a_latin1_source_are_read_as_the_utf8_tally_wrote(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    """CSV converted from JSON is tally's own UTF-8, whatever the source declares."""
    source_id = create_source(api, ingestion_tenant, encoding="latin-1").json()["id"]
    rows = [{"name": "Łódź €", "city": "Zürich"}, {"name": "日本", "city": "café"}]
    response = api.post(
        f"/api/v2/sources/{source_id}/feed-source", json=rows, headers=ingestion_tenant.v2_headers
    )
    assert response.status_code == 202, response.text
    run_pipeline(runtime)
    assert rows_of(api, ingestion_tenant, source_id) == rows


@pytest.mark.parametrize("encoding", ["klingon", "rot13", "base64", "", 1252, ["utf-8"]])
def test_unknown_encoding_of_a_source_is_422_naming_the_field(
    api: httpx.Client, ingestion_tenant: Tenant, encoding: Any
) -> None:
    assert_refused(create_source(api, ingestion_tenant, encoding=encoding))


# --- POST /api/v2/webhooks -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "name", "expected"),
    [
        ("latin-1", "latin1.csv", LATIN1_ROWS),
        ("utf-16", "utf16.csv", [{"id": 1, "name": "日本"}, {"id": 2, "name": "Łódź"}]),
    ],
)
def test_webhook_downloads_are_read_in_the_declared_encoding(
    api: httpx.Client,
    runtime: Runtime,
    ingestion_tenant: Tenant,
    file_server: str,
    encoding: str,
    name: str,
    expected: list[dict[str, Any]],
) -> None:
    created = register(api, ingestion_tenant, encoding=encoding)
    assert created.status_code == 201, created.text
    assert set(created.json()) == {"id", "name", "webhook_id"}  # the spec's answer, no more
    source_id, webhook_id = created.json()["id"], created.json()["webhook_id"]
    first = notify(api, webhook_id, f"{file_server}/files/{name}")
    run_pipeline(runtime)
    assert file_of(api, ingestion_tenant, source_id, first)["status"] == "delivered"
    assert rows_of(api, ingestion_tenant, source_id) == expected


def test_webhook_download_of_mixed_bytes_fails_by_default(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, file_server: str
) -> None:
    created = register(api, ingestion_tenant).json()
    file_id = notify(api, created["webhook_id"], f"{file_server}/files/mixed.csv")
    run_pipeline(runtime)
    file = file_of(api, ingestion_tenant, created["id"], file_id)
    assert file["status"] == "failed"
    assert file["error"].startswith("line 3:")
    assert "byte offset 21" in file["error"]


@pytest.mark.parametrize("encoding", ["klingon", "rot13", "", 8859])
def test_unknown_encoding_of_a_webhook_is_422_naming_the_field(
    api: httpx.Client, ingestion_tenant: Tenant, encoding: Any
) -> None:
    assert_refused(register(api, ingestion_tenant, encoding=encoding))


def test_encoding_inside_the_webhook_object_is_refused(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    """The field is top-level: an unknown field of `webhook` is refused as before."""
    response = register(api, ingestion_tenant, webhook={"encoding": "latin-1"})
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == ["webhook.encoding"]


# --- the OpenAPI document ------------------------------------------------------------------


def request_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    """The JSON body of POST `path`: a reference to its component."""
    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    schema: dict[str, Any] = document["components"]["schemas"][
        body["schema"]["$ref"].rsplit("/")[-1]
    ]
    return schema


@pytest.mark.parametrize("path", ["/api/v2/sources", "/api/v2/webhooks"])
def test_openapi_documents_the_encoding_field(api: httpx.Client, path: str) -> None:
    schema = request_schema(api.get("/api/v1/openapi.json").json(), path)
    description = schema["properties"]["encoding"]["description"]
    for words in ("utf-8", "latin-1", "cp1252", "utf-16", "line", "byte offset"):
        assert words in description.lower(), description
    assert "encoding" not in schema.get("required", [])


def test_openapi_lists_the_encodings_readme_names(api: httpx.Client) -> None:
    """A client generated from the document sends only listed names: README's among them."""
    listed = request_schema(api.get("/api/v1/openapi.json").json(), "/api/v2/sources")
    enum = listed["properties"]["encoding"]["enum"]
    paragraph = README.read_text().split("Each source has an `encoding`", 1)[1].split("\n\n")[0]
    named = ["utf-8", "latin-1", "cp1252", "utf-16", "utf-16-le"]
    assert [name for name in named if f"`{name}`" not in paragraph] == []
    assert [name for name in named if name not in enum] == []
    assert [name for name in enum if canonical_encoding(name) not in enum] == []
