"""The ingestion API's contract for webhooks (spec parts 2, 4, 5, 7), on both backends."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from support.factories import Tenant, make_tenant
from tally.runtime import Runtime
from tally.storage import files

NOTIFY = "/api/v2/webhooks/{}/feed-source"


def register(api: httpx.Client, tenant: Tenant, **body: Any) -> httpx.Response:
    return api.post("/api/v2/webhooks", headers=tenant.v2_headers, json={"webhook": {}, **body})


def test_registration_answers_201_with_id_name_and_a_secret_webhook_id(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    response = register(api, ingestion_tenant, name="bank")
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"id", "name", "webhook_id"}
    assert body["name"] == "bank"
    webhook_id = body["webhook_id"]
    assert len(webhook_id) >= 43  # 256 random bits, URL-safe base64
    assert all(c.isalnum() or c in "-_" for c in webhook_id)
    with runtime.engine.connect() as conn:
        stored = conn.execute(text("SELECT webhook_id_hash FROM webhooks")).scalars().all()
    assert stored == [hashlib.sha256(webhook_id.encode()).hexdigest()]  # never in clear


def test_defaults_reply_200_accepted_and_read_file_url(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    created = register(api, ingestion_tenant, name="defaults").json()
    reply = api.post(
        NOTIFY.format(created["webhook_id"]),
        json={"file_url": "https://files.example.com/a.csv?sig=secret", "filename": "a.csv"},
    )
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == {"status": "accepted"}
    with runtime.engine.connect() as conn:
        (queued,) = files.list_files(conn, created["id"], limit=10)
    assert (queued.status, queued.filename) == ("queued", "a.csv")
    assert queued.url_redacted == "https://files.example.com/a.csv"  # no signature kept
    assert "secret" not in (queued.url_encrypted or "")


def test_configured_mapping_and_reply_are_used_verbatim(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    webhook = {
        "file_mapping": {"url_field": "items[0].link.href", "filename_field": "meta.name"},
        "response_config": {
            "status_code": 202,
            "content_type": "application/vnd.acme+json",
            "body": {"ok": True, "n": [1, 2]},
        },
    }
    created = api.post(
        "/api/v2/webhooks",
        headers=ingestion_tenant.v2_headers,
        json={"name": "mapped", "webhook": webhook},
    ).json()
    payload = {"items": [{"link": {"href": "https://x.example/f.csv"}}], "meta": {"name": "f"}}
    reply = api.post(NOTIFY.format(created["webhook_id"]), json=payload)
    assert reply.status_code == 202
    assert reply.headers["content-type"] == "application/vnd.acme+json"
    assert reply.content == b'{"ok":true,"n":[1,2]}'
    with runtime.engine.connect() as conn:
        (queued,) = files.list_files(conn, created["id"], limit=10)
    assert queued.filename == "f"


def test_422_names_every_invalid_field_at_once(api: httpx.Client, ingestion_tenant: Tenant) -> None:
    body = {
        "webhook": {
            "file_mapping": {"url_field": "a..b"},
            "credentials": {"type": "basic_auth"},
            "response_config": {"status_code": "x"},
        },
        "folder_id": "nope",
    }
    response = api.post("/api/v2/webhooks", headers=ingestion_tenant.v2_headers, json=body)
    assert response.status_code == 422
    fields = {error["field"] for error in response.json()["errors"]}
    assert "name" in fields
    assert "folder_id" in fields
    assert "webhook.file_mapping.url_field" in fields
    assert "webhook.response_config.status_code" in fields
    assert any(f and f.startswith("webhook.credentials") and f.endswith("username") for f in fields)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"folder_id": "1"}, "folder_id"),  # a JSON string is not an integer
        ({"folder_id": 1.5}, "folder_id"),
        ({"folder_id": True}, "folder_id"),
        (
            {"webhook": {"response_config": {"status_code": "200"}}},
            "webhook.response_config.status_code",
        ),
    ],
)
def test_json_types_are_taken_as_declared(
    api: httpx.Client, ingestion_tenant: Tenant, body: dict[str, Any], field: str
) -> None:
    response = register(api, ingestion_tenant, name="typed", **body)
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == [field]


def test_a_whole_number_spelled_with_a_fraction_is_an_integer(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    """JSON Schema, and so the OpenAPI document, calls 200.0 an integer: tally agrees."""
    hook = {"response_config": {"status_code": 202.0}}
    response = register(api, ingestion_tenant, name="whole", webhook=hook)
    assert response.status_code == 201, response.text
    webhook_id = response.json()["webhook_id"]
    reply = api.post(NOTIFY.format(webhook_id), json={"file_url": "https://x.example/a.csv"})
    assert reply.status_code == 202
    refused = register(api, ingestion_tenant, name="whole 2", folder_id=987654.0)
    assert [e["field"] for e in refused.json()["errors"]] == ["folder_id"]
    assert refused.status_code == 400  # as for 987654: no such folder, not a type error


@pytest.mark.parametrize("name", ["", " ", "a\u0000b", "tab\there", "x" * 201])
def test_a_name_that_cannot_be_a_name_is_422(
    api: httpx.Client, ingestion_tenant: Tenant, name: str
) -> None:
    response = register(api, ingestion_tenant, name=name)
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["name"]


def test_missing_webhook_is_422(api: httpx.Client, ingestion_tenant: Tenant) -> None:
    response = api.post("/api/v2/webhooks", headers=ingestion_tenant.v2_headers, json={"name": "x"})
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["errors"]] == ["webhook"]


def test_duplicate_name_and_foreign_folder_are_400_with_errors(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    other = make_tenant(runtime.engine, ingestion=True)
    foreign_folder = runtime.admin.create_folder(workspace_id=other.workspace_id, name="theirs")
    assert register(api, ingestion_tenant, name="taken").status_code == 201
    response = register(api, ingestion_tenant, name="taken", folder_id=foreign_folder)
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["errors"]} == {"name", "folder_id"}
    own = runtime.admin.create_folder(workspace_id=ingestion_tenant.workspace_id, name="mine")
    assert register(api, ingestion_tenant, name="in folder", folder_id=own).status_code == 201


@pytest.mark.parametrize("wrong", ["x-api-key", "x-svc-workspace", "x-svc-account", "all"])
def test_every_failed_check_is_the_same_403_before_the_body(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime, wrong: str
) -> None:
    other = make_tenant(runtime.engine, ingestion=True)
    headers = ingestion_tenant.v2_headers
    if wrong == "all":
        headers = {}
    else:
        headers[wrong] = other.v2_headers[wrong] if wrong != "x-api-key" else "tly_unknown"
    answers = [
        api.post("/api/v2/webhooks", headers=headers, json={"name": "x", "webhook": {}}),
        api.post("/api/v2/webhooks", headers=headers, content=b"{not json"),
        api.post("/api/v2/webhooks", headers=headers, json={"bad": True}),
    ]
    for answer in answers:
        assert answer.status_code == 403
        assert answer.json() == {"errors": [{"field": None, "message": "Forbidden"}]}


def test_a_workspace_not_enabled_for_ingestion_is_403(api: httpx.Client, runtime: Runtime) -> None:
    idle = make_tenant(runtime.engine, ingestion=False)
    assert register(api, idle, name="x").status_code == 403
    runtime.admin.enable_ingestion(idle.workspace_id)
    assert register(api, idle, name="x").status_code == 201


def test_storage_failure_is_502_and_leaves_nothing(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    # The next sources' tables already exist: creating the table really fails.
    with runtime.engine.begin() as conn:
        for n in range(1, 40):
            conn.execute(text(f"CREATE TABLE r_{n} (x INTEGER)"))
    response = register(api, ingestion_tenant, name="unlucky")
    assert response.status_code == 502
    assert response.json()["errors"][0]["message"].startswith("Storage provisioning failed")
    with runtime.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM resources")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM webhooks")).scalar_one() == 0


def test_unexpected_failure_is_a_json_500_without_a_trace(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    created = register(api, ingestion_tenant, name="corrupted").json()
    with runtime.engine.begin() as conn:  # a catalogue row no version of tally wrote
        conn.execute(
            text("UPDATE resources SET columns = '[{}]' WHERE id = :id"), {"id": created["id"]}
        )
    response = api.get(
        f"/api/v2/sources/{created['id']}/files", headers=ingestion_tenant.v2_headers
    )
    assert response.status_code == 500
    assert response.json() == {"errors": [{"field": None, "message": "Internal server error"}]}
    assert "Traceback" not in response.text


def test_unknown_webhook_is_404_even_with_a_bad_body(api: httpx.Client) -> None:
    for content in (b'{"file_url": "https://x.example/a.csv"}', b"not json"):
        response = api.post(NOTIFY.format("whk_unknown"), content=content)
        assert response.status_code == 404
        assert response.json() == {"errors": [{"field": None, "message": "Not Found"}]}


def test_bad_notifications_are_4xx_naming_the_path(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    webhook = {"file_mapping": {"url_field": "data.url"}}
    created = api.post(
        "/api/v2/webhooks",
        headers=ingestion_tenant.v2_headers,
        json={"name": "strict", "webhook": webhook},
    ).json()
    url = NOTIFY.format(created["webhook_id"])
    not_json = api.post(url, content=b"{oops")
    assert not_json.status_code == 422
    assert "not valid JSON" in not_json.json()["errors"][0]["message"]
    too_big = api.post(url, json={"data": {"url": "https://x.example/a.csv"}, "pad": "x" * 70_000})
    assert too_big.status_code == 422
    assert "65536" in too_big.json()["errors"][0]["message"]
    for payload in ({"data": {}}, {"data": {"url": 5}}, {"data": {"url": "ftp://x/a"}}, [1]):
        response = api.post(url, json=payload)
        assert response.status_code == 400, payload
        error = response.json()["errors"][0]
        assert error["field"] in ("data.url", None)
        if error["field"]:
            assert "'data.url'" in error["message"]


@pytest.mark.parametrize(
    ("file_url", "says"),
    [
        ("http://files.example:99999/a.csv", "is not an http(s) URL"),
        ("http://files.example:abc/a.csv", "is not an http(s) URL"),
        ("http://[::1/a.csv", "is not an http(s) URL"),
        (" https://files.example/a.csv", "is not an http(s) URL"),
        ("https://files.example/a b.csv", "is not an http(s) URL"),
        ("https://files.example/a.csv\n", "is not an http(s) URL"),
        ("https://user:pw@files.example/a.csv", "must not carry a user or password"),
    ],
)
def test_file_urls_no_download_could_start_from_are_400(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime, file_url: str, says: str
) -> None:
    created = register(api, ingestion_tenant, name="urls").json()
    response = api.post(NOTIFY.format(created["webhook_id"]), json={"file_url": file_url})
    assert response.status_code == 400, response.text
    (problem,) = response.json()["errors"]
    assert problem["field"] == "file_url"
    assert says in problem["message"]
    with runtime.engine.connect() as conn:
        assert files.list_files(conn, created["id"], limit=10) == []


@pytest.mark.parametrize(
    ("filename", "says"),
    [("a\u0000b.csv", "must not contain control characters"), ("x" * 1001, "at most 1000")],
)
def test_a_file_name_that_cannot_be_kept_is_400(
    api: httpx.Client, ingestion_tenant: Tenant, filename: str, says: str
) -> None:
    created = register(api, ingestion_tenant, name="names").json()
    payload = {"file_url": "https://files.example/a.csv", "filename": filename}
    response = api.post(NOTIFY.format(created["webhook_id"]), json=payload)
    assert response.status_code == 400, response.text
    (problem,) = response.json()["errors"]
    assert problem["field"] == "filename"
    assert says in problem["message"]


def test_a_long_url_names_its_file_with_the_longest_name_kept(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    created = register(api, ingestion_tenant, name="long").json()
    segment = "f" * 1500
    reply = api.post(
        NOTIFY.format(created["webhook_id"]), json={"file_url": f"https://files.example/{segment}"}
    )
    assert reply.status_code == 200, reply.text
    with runtime.engine.connect() as conn:
        (queued,) = files.list_files(conn, created["id"], limit=10)
    assert queued.filename == segment[:1000]


def test_ids_beyond_any_stored_id_name_nothing(api: httpx.Client, ingestion_tenant: Tenant) -> None:
    huge = 2**63
    for path in ("/api/v2/webhooks", "/api/v2/sources"):
        body = {"name": f"big {path}", "folder_id": huge, "webhook": {}}
        if path == "/api/v2/sources":
            del body["webhook"]
        response = api.post(path, headers=ingestion_tenant.v2_headers, json=body)
        assert response.status_code == 400, response.text
        assert [e["field"] for e in response.json()["errors"]] == ["folder_id"]
    source = register(api, ingestion_tenant, name="listed").json()
    listing = api.get(
        f"/api/v2/sources/{source['id']}/files",
        params={"after": str(10**20)},
        headers=ingestion_tenant.v2_headers,
    )
    assert listing.status_code == 200, listing.text
    assert listing.json()["data"] == []


def test_an_account_header_of_unicode_digits_is_the_same_403(
    api: httpx.Client, ingestion_tenant: Tenant
) -> None:
    """ "²".isdigit() is true but int("²") fails: the CORS check must not reach int()."""
    headers = {
        **ingestion_tenant.v2_headers,
        "x-api-key": "wrong",
        "Origin": "https://ops.acme.example",
    }
    headers["x-svc-account"] = "\u00b2"
    response = api.get(
        "/api/v2/sources/1/files", headers=[(k, v.encode("latin-1")) for k, v in headers.items()]
    )
    assert response.status_code == 403, response.text


def test_idempotency_key_queues_a_retried_notification_once(
    api: httpx.Client, ingestion_tenant: Tenant, runtime: Runtime
) -> None:
    created = register(api, ingestion_tenant, name="retried").json()
    url = NOTIFY.format(created["webhook_id"])
    payload = {"file_url": "https://x.example/one.csv"}
    ids = {
        api.post(url, json=payload, headers={"Idempotency-Key": "k-1"}).headers["x-tally-file-id"]
        for _ in range(3)
    }
    assert len(ids) == 1
    api.post(url, json=payload, headers={"Idempotency-Key": "k-2"})
    api.post(url, json=payload)
    with runtime.engine.connect() as conn:
        assert len(files.list_files(conn, created["id"], limit=10)) == 3
    _refuses_the_key_with_another_file(api, url, runtime, created["id"])


def _refuses_the_key_with_another_file(
    api: httpx.Client, url: str, runtime: Runtime, source_id: int
) -> None:
    """The key sent with another file is refused (422, naming the conflict), the same
    file with other payload fields is a retry."""
    key = {"Idempotency-Key": "stmt-1"}
    first = api.post(url, json={"file_url": "https://x.example/one.csv?sig=s3cret"}, headers=key)
    file_id = first.headers["x-tally-file-id"]
    # The same file, other payload fields (a send time): a retry.
    retry = api.post(
        url, json={"file_url": "https://x.example/one.csv?sig=s3cret", "sent": 2}, headers=key
    )
    assert (retry.status_code, retry.headers["x-tally-file-id"]) == (200, file_id)
    for payload, difference in [
        ({"file_url": "https://x.example/two.csv?sig=s3cret"}, "from another URL"),
        ({"file_url": "https://x.example/one.csv?sig=other"}, "from another URL"),
        ({"file_url": "https://x.example/one.csv?sig=s3cret", "filename": "b.csv"}, "named"),
    ]:
        refused = api.post(url, json=payload, headers=key)
        assert refused.status_code == 422, refused.text
        [problem] = refused.json()["errors"]
        assert problem["field"] == "header.Idempotency-Key"
        assert problem["message"].startswith(
            f"Idempotency-Key 'stmt-1' was used with a different request: it queued file "
            f"{file_id} {difference}"
        )
        assert "s3cret" not in refused.text
        assert "x-tally-file-id" not in refused.headers
    with runtime.engine.connect() as conn:
        assert len(files.list_files(conn, source_id, limit=10)) == 4


def test_cors_headers_only_for_the_accounts_origins(api: httpx.Client, runtime: Runtime) -> None:
    allowed = make_tenant(
        runtime.engine, ingestion=True, allowed_origins=["https://ops.acme.example"]
    )
    plain = make_tenant(runtime.engine, ingestion=True)
    preflight = api.options(
        "/api/v2/webhooks",
        headers={
            "Origin": "https://ops.acme.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-api-key",
        },
    )
    assert preflight.headers["access-control-allow-origin"] == "https://ops.acme.example"
    assert "x-api-key" in preflight.headers["access-control-allow-headers"]
    stranger = api.options(
        "/api/v2/webhooks",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in stranger.headers
    own = register(api, allowed, name="cors")
    assert own.status_code == 201
    with_origin = api.post(
        "/api/v2/webhooks",
        json={"name": "c2", "webhook": {}},
        headers={**allowed.v2_headers, "Origin": "https://ops.acme.example"},
    )
    assert with_origin.headers["access-control-allow-origin"] == "https://ops.acme.example"
    other_account = api.post(
        "/api/v2/webhooks",
        json={"name": "c3", "webhook": {}},
        headers={**plain.v2_headers, "Origin": "https://ops.acme.example"},
    )
    assert other_account.status_code == 201
    assert "access-control-allow-origin" not in other_account.headers
