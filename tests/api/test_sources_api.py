"""POST /api/v2/sources and POST /api/v2/sources/{id}/feed-source over real HTTP.

Every test runs on SQLite and PostgreSQL through a uvicorn server on loopback. Uploads
are then carried through the real pipeline (DeliveryService.claim_file + process_file) and
read back through the Data API, with decimals parsed exactly.
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
from support.factories import Tenant, make_tenant, run_pipeline
from support.servers import serve_app
from tally.api.app import create_app
from tally.core.columns import Column, ColumnType
from tally.runtime import Runtime, build_runtime
from tally.services.json_rows import RULES
from tally.storage import files, resources

NOT_FOUND = {"errors": [{"field": None, "message": "Not Found"}]}
FORBIDDEN = {"errors": [{"field": None, "message": "Forbidden"}]}
CSV = {"content-type": "text/csv"}
JSON = {"content-type": "application/json"}


def create(api: httpx.Client, tenant: Tenant, body: dict[str, Any]) -> int:
    response = api.post("/api/v2/sources", json=body, headers=tenant.v2_headers)
    assert response.status_code == 201, response.text
    source_id: int = response.json()["id"]
    return source_id


def feed(
    api: httpx.Client,
    tenant: Tenant,
    source_id: int,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    return api.post(
        f"/api/v2/sources/{source_id}/feed-source",
        headers={**tenant.v2_headers, **(headers or {})},
        **kwargs,
    )


def queued(response: httpx.Response) -> int:
    assert response.status_code == 202, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"file_id", "status"}
    assert body["status"] == "queued"
    file_id: int = body["file_id"]
    return file_id


def file_status(api: httpx.Client, tenant: Tenant, source_id: int, file_id: int) -> Any:
    url = f"/api/v2/sources/{source_id}/files/{file_id}"
    response = api.get(url, headers=tenant.v2_headers)
    assert response.status_code == 200, response.text
    return response.json()


def data(api: httpx.Client, tenant: Tenant, source_id: int) -> tuple[list[Any], bytes]:
    response = api.get(f"/api/v1/resources/{source_id}/data", headers=tenant.headers)
    assert response.status_code == 200, response.text
    rows: list[Any] = json.loads(response.content, parse_float=Decimal)["data"]
    return rows, response.content


def error_fields(response: httpx.Response, status: int) -> list[str | None]:
    assert response.status_code == status, response.text
    return [e["field"] for e in response.json()["errors"]]


def error_text(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return " ".join(e["message"] for e in response.json()["errors"])


@pytest.fixture
def source_id(api: httpx.Client, ingestion_tenant: Tenant) -> int:
    return create(api, ingestion_tenant, {"name": "uploads"})


# --- POST /api/v2/sources -----------------------------------------------------------------


def test_create_answers_201_with_id_and_name(api: httpx.Client, runtime: Runtime) -> None:
    tenant = make_tenant(runtime.engine, ingestion=True)
    response = api.post("/api/v2/sources", json={"name": "Bank feed"}, headers=tenant.v2_headers)
    assert response.status_code == 201
    body = response.json()
    assert body == {"id": body["id"], "name": "Bank feed"}
    with runtime.engine.connect() as conn:
        stored = resources.get_resource(conn, body["id"])
    assert (stored.workspace_id, stored.kind, stored.is_placeholder) == (
        tenant.workspace_id,
        "source",
        True,
    )


def test_create_with_columns_makes_a_typed_source(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    columns = [
        {"name": "id", "type": "integer"},
        {"name": "amount", "type": "decimal"},
        {"name": "fee", "type": "decimal", "scale": 4},
        {"name": "booked", "type": "date"},
        {"name": "at", "type": "timestamp", "timezone": True},
        {"name": "ok", "type": "boolean"},
        {"name": "memo", "type": "text"},
    ]
    source_id = create(api, ingestion_tenant, {"name": "typed", "columns": columns})
    with runtime.engine.connect() as conn:
        stored = resources.get_resource(conn, source_id)
    assert stored.is_placeholder is False
    assert stored.columns == (
        Column("id", "c0", ColumnType.INTEGER),
        Column("amount", "c1", ColumnType.DECIMAL, 2),
        Column("fee", "c2", ColumnType.DECIMAL, 4),
        Column("booked", "c3", ColumnType.DATE),
        Column("at", "c4", ColumnType.TIMESTAMP, 0, True),
        Column("ok", "c5", ColumnType.BOOLEAN),
        Column("memo", "c6", ColumnType.TEXT),
    )
    csv = (
        "memo,ok,at,booked,fee,amount,id\n"
        "première,true,2024-05-01T10:00:00+02:00,2024-05-01,0.0001,12345678901234567.89,1\n"
        ",false,,,,,2\n"
    )
    file_id = queued(feed(api, ingestion_tenant, source_id, CSV, content=csv.encode()))
    run_pipeline(runtime)
    assert file_status(api, ingestion_tenant, source_id, file_id)["status"] == "delivered"
    rows, raw = data(api, ingestion_tenant, source_id)
    assert rows == [
        {
            "id": 1,
            "amount": Decimal("12345678901234567.89"),
            "fee": Decimal("0.0001"),
            "booked": "2024-05-01",
            "at": "2024-05-01T08:00:00Z",
            "ok": True,
            "memo": "première",
        },
        {
            "id": 2,
            "amount": None,
            "fee": None,
            "booked": None,
            "at": None,
            "ok": False,
            "memo": None,
        },
    ]
    assert b"12345678901234567.89" in raw


def test_a_typed_source_fails_a_file_with_other_columns(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    columns = [{"name": "id", "type": "integer"}, {"name": "amount", "type": "decimal"}]
    source_id = create(api, ingestion_tenant, {"name": "typed", "columns": columns})
    file_id = queued(feed(api, ingestion_tenant, source_id, CSV, content=b"id,total\n1,2.50\n"))
    run_pipeline(runtime)
    status = file_status(api, ingestion_tenant, source_id, file_id)
    assert status["status"] == "failed"
    assert "missing columns: amount" in status["error"]
    assert "unexpected columns: total" in status["error"]
    assert data(api, ingestion_tenant, source_id)[0] == []


def test_create_with_notification_config(api: httpx.Client, ingestion_tenant: Tenant) -> None:
    body = {
        "name": "notified",
        "notification_config": {"url": "https://hooks.example/t", "events": ["file.failed"]},
    }
    response = api.post("/api/v2/sources", json=body, headers=ingestion_tenant.v2_headers)
    assert response.status_code == 201


def test_create_rejects_a_duplicate_name_and_a_foreign_folder(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    create(api, ingestion_tenant, {"name": "taken"})
    headers = ingestion_tenant.v2_headers
    again = api.post("/api/v2/sources", json={"name": "taken"}, headers=headers)
    assert error_fields(again, 400) == ["name"]
    assert "already exists" in error_text(again, 400)
    typed_again = {"name": "taken", "columns": [{"name": "a", "type": "text"}]}
    assert error_fields(api.post("/api/v2/sources", json=typed_again, headers=headers), 400) == [
        "name"
    ]
    folder = api.post("/api/v2/sources", json={"name": "new", "folder_id": 987654}, headers=headers)
    assert error_fields(folder, 400) == ["folder_id"]


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, ["name"]),
        ({"name": ""}, ["name"]),
        ({"name": "   "}, ["name"]),
        ({"name": "a\u0000b"}, ["name"]),  # PostgreSQL text cannot hold NUL
        ({"name": "line\nbreak"}, ["name"]),
        ({"name": "x" * 201}, ["name"]),
        ({"name": "x", "webhook": {}}, ["webhook"]),
        ({"name": "x", "columns": []}, ["columns"]),
        ({"name": "x", "columns": [{"name": "a"}]}, ["columns.0.type"]),
        ({"name": "x", "columns": [{"name": "", "type": "text"}]}, ["columns.0.name"]),
        ({"name": "x", "columns": [{"name": "a", "type": "money"}]}, ["columns.0.type"]),
        ({"name": "x", "columns": [{"name": "a", "type": "text", "x": 1}]}, ["columns.0.x"]),
        ({"name": "x", "columns": [{"name": "a", "type": "text", "scale": 2}]}, ["columns.0"]),
        (
            {"name": "x", "columns": [{"name": "a", "type": "date", "timezone": True}]},
            ["columns.0"],
        ),
        (
            {"name": "x", "columns": [{"name": "a", "type": "decimal", "scale": 19}]},
            ["columns.0.scale"],
        ),
        (
            {
                "name": "x",
                "columns": [{"name": "a", "type": "text"}, {"name": "a", "type": "date"}],
            },
            ["columns"],
        ),
        ({"name": "x", "folder_id": "one"}, ["folder_id"]),
        ({"name": "x", "notification_config": {"url": "ftp://x"}}, ["notification_config.url"]),
        ([], [None]),
    ],
)
def test_create_names_each_invalid_field(
    api: httpx.Client, ingestion_tenant: Tenant, body: Any, fields: list[str | None]
) -> None:
    response = api.post("/api/v2/sources", json=body, headers=ingestion_tenant.v2_headers)
    assert error_fields(response, 422) == fields


def test_create_refuses_a_body_that_is_not_json(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    response = api.post(
        "/api/v2/sources", content=b"{name", headers={**ingestion_tenant.v2_headers, **JSON}
    )
    assert "not valid JSON" in error_text(response, 422)


# --- authentication and ownership -----------------------------------------------------------


@pytest.mark.parametrize(
    "broken",
    [
        {"x-api-key": "tly_wrong"},
        {"x-api-key": ""},
        {"x-svc-workspace": "999999"},
        {"x-svc-workspace": "abc"},
        {"x-svc-account": "999999"},
        {"x-svc-account": ""},
    ],
)
@pytest.mark.parametrize("endpoint", ["create", "feed"])
def test_each_wrong_header_is_the_same_403(
    api: httpx.Client,
    ingestion_tenant: Tenant,
    source_id: int,
    broken: dict[str, str],
    endpoint: str,
) -> None:
    headers = {**ingestion_tenant.v2_headers, **broken}
    if endpoint == "create":  # an invalid body too: credentials are checked first
        response = api.post("/api/v2/sources", json={"bad": True}, headers=headers)
    else:
        url = f"/api/v2/sources/{source_id}/feed-source"
        response = api.post(url, content=b"[]", headers={**headers, **JSON})
    assert response.status_code == 403
    assert response.json() == FORBIDDEN


def test_missing_headers_and_a_workspace_not_enabled_are_403(
    api: httpx.Client, runtime: Runtime, source_id: int
) -> None:
    assert api.post("/api/v2/sources", json={"name": "x"}).json() == FORBIDDEN
    feed_url = f"/api/v2/sources/{source_id}/feed-source"
    assert api.post(feed_url, content=b"a\n1\n", headers=CSV).status_code == 403
    disabled = make_tenant(runtime.engine, ingestion=False)
    response = api.post("/api/v2/sources", json={"name": "x"}, headers=disabled.v2_headers)
    assert (response.status_code, response.json()) == (403, FORBIDDEN)


def test_another_workspaces_source_is_not_found(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, source_id: int
) -> None:
    stranger = make_tenant(runtime.engine, ingestion=True)
    for target in (source_id, 999_999, 99_999_999_999):
        response = feed(api, stranger, target, CSV, content=b"a\n1\n")
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    # ownership is decided before the content type or the body are looked at
    response = feed(api, stranger, source_id, {"content-type": "image/png"}, content=b"x")
    assert (response.status_code, response.json()) == (404, NOT_FOUND)
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source_id) == 0


# --- POST /api/v2/sources/{id}/feed-source ---------------------------------------------------


@pytest.mark.parametrize("media", ["text/csv", "application/csv", "text/plain; charset=utf-8"])
def test_a_csv_body_is_queued_then_delivered(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, source_id: int, media: str
) -> None:
    body = "id,amount,memo\n1,0.30000000000000004,naïve ☃\n2,0.1,\n".encode()
    file_id = queued(feed(api, ingestion_tenant, source_id, {"content-type": media}, content=body))
    status = file_status(api, ingestion_tenant, source_id, file_id)
    assert (status["origin"], status["status"], status["bytes"]) == ("upload", "queued", len(body))
    run_pipeline(runtime)
    assert file_status(api, ingestion_tenant, source_id, file_id)["rows"] == 2
    rows, raw = data(api, ingestion_tenant, source_id)
    assert rows == [
        {"id": 1, "amount": Decimal("0.30000000000000004"), "memo": "naïve ☃"},
        {"id": 2, "amount": Decimal("0.10000000000000000"), "memo": None},
    ]
    assert b"0.30000000000000004" in raw


def test_a_streamed_csv_body_without_length_is_delivered(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, source_id: int
) -> None:
    def body() -> Iterator[bytes]:
        yield b"n,amount\n"
        for start in range(0, 30_000, 1000):
            yield "".join(f"{n},{n}.{n % 100:02d}\n" for n in range(start, start + 1000)).encode()

    file_id = queued(feed(api, ingestion_tenant, source_id, CSV, content=body()))
    run_pipeline(runtime)
    status = file_status(api, ingestion_tenant, source_id, file_id)
    assert (status["status"], status["rows"]) == ("delivered", 30_000)


def test_a_multipart_file_part_is_delivered_with_its_name(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, source_id: int
) -> None:
    content = "id,city\n1,Zürich\n2,東京\n".encode()
    upload = {"file": ("ledger-2024.csv", content, "text/csv")}
    file_id = queued(feed(api, ingestion_tenant, source_id, files=upload))
    status = file_status(api, ingestion_tenant, source_id, file_id)
    assert (status["filename"], status["bytes"]) == ("ledger-2024.csv", len(content))
    run_pipeline(runtime)
    assert data(api, ingestion_tenant, source_id)[0] == [
        {"id": 1, "city": "Zürich"},
        {"id": 2, "city": "東京"},
    ]


@pytest.mark.parametrize("wrapped", [False, True])
def test_json_rows_are_converted_and_stay_exact(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, source_id: int, wrapped: bool
) -> None:
    rows = (
        b'[{"id": 1, "amount": 12345678901234567.89, "who": {"name": "Ana", "tier": 2}},'
        b' {"id": 2, "amount": 0.10, "tags": ["x", 1E+2], "who": {"name": "\xc3\x89lodie"}},'
        b' {"id": 3, "amount": -5, "ok": true, "who": null}]'
    )
    body = b'{"rows": ' + rows + b"}" if wrapped else rows
    file_id = queued(feed(api, ingestion_tenant, source_id, JSON, content=body))
    run_pipeline(runtime)
    assert file_status(api, ingestion_tenant, source_id, file_id)["status"] == "delivered"
    got, raw = data(api, ingestion_tenant, source_id)
    assert got == [
        {
            "id": 1,
            "amount": Decimal("12345678901234567.89"),
            "who.name": "Ana",
            "who.tier": 2,
            "tags": None,
            "ok": None,
            "who": None,
        },
        {
            "id": 2,
            "amount": Decimal("0.10"),
            "who.name": "Élodie",
            "who.tier": None,
            "tags": '["x",100]',
            "ok": None,
            "who": None,
        },
        {
            "id": 3,
            "amount": Decimal("-5.00"),
            "who.name": None,
            "who.tier": None,
            "tags": None,
            "ok": True,
            "who": None,
        },
    ]
    assert b"12345678901234567.89" in raw


def test_other_content_types_are_415(
    api: httpx.Client, ingestion_tenant: Tenant, source_id: int
) -> None:
    for media in ("application/xml", "application/x-www-form-urlencoded", "image/png"):
        response = feed(
            api, ingestion_tenant, source_id, {"content-type": media}, content=b"a\n1\n"
        )
        assert response.status_code == 415
        assert "text/csv" in error_text(response, 415)
    assert (
        feed(api, ingestion_tenant, source_id, content=b"a\n1\n").status_code == 415
    )  # none at all


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b'[{"a": 1}, 7]', "[1]", "[1] is not a JSON object"),
        (b'{"rows": [{"a": 1}, [2]]}', "rows[1]", "rows[1] is not a JSON object"),
        (b"[]", None, "no rows"),
        (b'{"rows": []}', "rows", "no rows"),
        (b'[{"a": 1}', None, "not valid JSON"),
        (b"", None, "not valid JSON"),
        (b'{"data": []}', "data", "unexpected field"),
        (b'"rows"', None, "array of objects"),
    ],
)
def test_json_bodies_that_are_not_rows_are_422(
    api: httpx.Client,
    runtime: Runtime,
    ingestion_tenant: Tenant,
    source_id: int,
    body: bytes,
    field: str | None,
    words: str,
) -> None:
    response = feed(api, ingestion_tenant, source_id, JSON, content=body)
    assert error_fields(response, 422) == [field]
    assert words in error_text(response, 422)
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source_id) == 0
    assert sorted(runtime.settings.blob_dir.rglob("*.*")) == []


def test_multipart_bodies_without_one_file_part_are_422(
    api: httpx.Client, ingestion_tenant: Tenant, source_id: int
) -> None:
    other = feed(api, ingestion_tenant, source_id, files={"upload": ("a.csv", b"a\n1\n")})
    assert error_fields(other, 422) == ["upload"]
    two = feed(
        api,
        ingestion_tenant,
        source_id,
        files=[("file", ("a.csv", b"a\n1\n")), ("file", ("b.csv", b"a\n2\n"))],
    )
    assert error_fields(two, 422) == ["file"]
    plain_field = feed(api, ingestion_tenant, source_id, files=[("note", (None, b"x"))])
    assert error_fields(plain_field, 422) == ["note"]
    no_boundary = feed(
        api, ingestion_tenant, source_id, {"content-type": "multipart/form-data"}, content=b"x"
    )
    assert "boundary" in error_text(no_boundary, 422)
    cut = feed(
        api,
        ingestion_tenant,
        source_id,
        {"content-type": "multipart/form-data; boundary=B"},
        content=b'--B\r\nContent-Disposition: form-data; name="file"\r\n\r\na\r\n1\r\n',
    )
    assert "before its last boundary" in error_text(cut, 422)
    empty = feed(api, ingestion_tenant, source_id, files={"file": ("e.csv", b"")})
    assert "empty" in error_text(empty, 422)
    nul_name = feed(
        api,
        ingestion_tenant,
        source_id,
        {"content-type": "multipart/form-data; boundary=B"},
        content=b'--B\r\nContent-Disposition: form-data; name="file"; filename="a\x00b.csv"'
        b"\r\n\r\na\r\n1\r\n--B--\r\n",
    )
    assert error_fields(nul_name, 422) == ["file"]
    assert "control characters" in error_text(nul_name, 422)


def test_an_empty_csv_body_is_422(
    api: httpx.Client, ingestion_tenant: Tenant, source_id: int
) -> None:
    assert "empty" in error_text(feed(api, ingestion_tenant, source_id, CSV, content=b""), 422)


def test_an_idempotency_key_queues_the_file_once(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, source_id: int
) -> None:
    key = {"Idempotency-Key": "batch-2024-05-01", **CSV}
    first = queued(feed(api, ingestion_tenant, source_id, key, content=b"n\n1\n"))
    retry = feed(api, ingestion_tenant, source_id, key, content=b"n\n1\n")
    assert (retry.status_code, retry.json()) == (202, {"file_id": first, "status": "queued"})
    other = queued(
        feed(api, ingestion_tenant, source_id, {**key, "Idempotency-Key": "b2"}, content=b"n\n2\n")
    )
    run_pipeline(runtime)
    late = feed(api, ingestion_tenant, source_id, key, content=b"n\n1\n")
    assert (late.status_code, late.json()) == (202, {"file_id": first, "status": "delivered"})
    # The key with other bytes: refused, naming the conflict; nothing queued.
    reused = feed(api, ingestion_tenant, source_id, key, content=b"n\n9\n")
    assert reused.json() == {
        "errors": [
            {
                "field": "header.Idempotency-Key",
                "message": "Idempotency-Key 'batch-2024-05-01' was used with a different "
                f"request: it queued file {first} with other bytes",
            }
        ]
    }
    assert reused.status_code == 422
    as_json = feed(
        api,
        ingestion_tenant,
        source_id,
        {**key, "Content-Type": "application/json"},
        content=b'[{"n": 1}]',
    )
    assert as_json.status_code == 422  # the same rows as JSON: another request
    listed = api.get(
        f"/api/v2/sources/{source_id}/files", headers=ingestion_tenant.v2_headers
    ).json()
    assert [f["id"] for f in listed["data"]] == [first, other]
    assert listed["data"][0]["idempotency_key"] == "batch-2024-05-01"
    assert [r["n"] for r in data(api, ingestion_tenant, source_id)[0]] == [1, 2]


def test_openapi_documents_both_routes_and_the_json_rules(api: httpx.Client) -> None:
    document = api.get("/api/v1/openapi.json").json()
    create_op = document["paths"]["/api/v2/sources"]["post"]
    assert set(create_op["responses"]) >= {"201", "400", "403", "422"}
    schemas = document["components"]["schemas"]

    def model(reference: dict[str, str]) -> Any:
        return schemas[reference["$ref"].rsplit("/", 1)[1]]

    schema = model(create_op["requestBody"]["content"]["application/json"]["schema"])
    column = model(schema["properties"]["columns"]["anyOf"][0]["items"])
    assert model(column["properties"]["type"])["enum"] == [
        "text",
        "integer",
        "decimal",
        "date",
        "timestamp",
        "boolean",
    ]
    feed_op = document["paths"]["/api/v2/sources/{source_id}/feed-source"]["post"]
    assert set(feed_op["responses"]) >= {"202", "403", "404", "413", "415", "422"}
    assert RULES in feed_op["description"]
    assert set(feed_op["requestBody"]["content"]) == {
        "text/csv",
        "application/csv",
        "text/plain",
        "multipart/form-data",
        "application/json",
    }
    assert "$ref" not in json.dumps(feed_op["requestBody"])


# --- size limit (a second app with TALLY_MAX_FILE_BYTES=1000) ------------------------------


@pytest.fixture
def small(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[httpx.Client, Runtime]]:
    settings = make_settings(request, backend, tmp_path / "small", max_file_bytes=1000)
    runtime = build_runtime(settings)
    try:
        with (
            serve_app(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=30) as client,
        ):
            yield client, runtime
    finally:
        runtime.close()


def test_bodies_over_the_limit_are_413_and_nothing_is_kept(
    small: tuple[httpx.Client, Runtime],
) -> None:
    client, runtime = small
    tenant = make_tenant(runtime.engine, ingestion=True)
    source_id = create(client, tenant, {"name": "small"})
    big_csv = b"n\n" + b"123456789\n" * 120

    def chunked() -> Iterator[bytes]:
        yield big_csv[:500]
        yield big_csv[500:]

    sparse = b"[" + b",".join(b'{"c%d": 1}' % n for n in range(60)) + b"]"  # 600 B -> 7 KB
    attempts: list[tuple[dict[str, str], dict[str, Any], str]] = [
        ({**CSV}, {"content": big_csv}, "the body is larger than the limit of 1000 bytes"),
        ({**CSV}, {"content": chunked()}, "the body is larger than the limit of 1000 bytes"),
        ({**CSV}, {"content": b"n\n" + b"1\n" * 40_000}, "larger than the limit of 1000 bytes"),
        ({}, {"files": {"file": ("f.csv", big_csv)}}, "larger than the limit of 1000 bytes"),
        ({**JSON}, {"content": b'[{"a": 1}' + b', {"a": 1}' * 120 + b"]"}, "the body is larger"),
        ({**JSON}, {"content": sparse}, "the CSV converted from the JSON body is larger"),
    ]
    for headers, kwargs, message in attempts:
        response = feed(client, tenant, source_id, headers, **kwargs)
        assert response.status_code == 413, response.text
        assert message in error_text(response, 413)
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source_id) == 0
    assert sorted(runtime.settings.blob_dir.rglob("*.*")) == []
    just_fits = b"n\n" + b"12345678\n" * 110  # 992 bytes
    file_id = queued(feed(client, tenant, source_id, CSV, content=just_fits))
    run_pipeline(runtime)
    assert file_status(client, tenant, source_id, file_id)["rows"] == 110
