"""Data API errors: every row of spec part 7, exact status and detail, in the spec's order.

Every test runs on SQLite and PostgreSQL through a real uvicorn server.
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import update

from support.data_api import Params, get_data_as
from support.databases import make_settings
from support.factories import Tenant, make_source, make_tenant
from support.servers import serve_app
from tally.api.app import create_app
from tally.core.clock import utc_now
from tally.runtime import Runtime, build_runtime
from tally.storage.resources import Resource
from tally.storage.schema import api_keys

CSV = "id,amount,memo\n1,10.00,a\n2,20.50,b\n"
NOT_APPLICABLE = "The requested filters or ordering could not be applied."
UNAVAILABLE = "Data platform is temporarily unavailable. Please try again later."


@dataclass(frozen=True)
class World:
    """Two tenants, each owning one source."""

    mine: Tenant
    other: Tenant
    source: Resource
    foreign: Resource


@pytest.fixture
def world(runtime: Runtime) -> World:
    mine, other = make_tenant(runtime.engine), make_tenant(runtime.engine)
    return World(
        mine,
        other,
        make_source(runtime.engine, mine, CSV),
        make_source(runtime.engine, other, CSV),
    )


def error(response: httpx.Response) -> tuple[int, Any]:
    assert response.headers["content-type"] == "application/json"
    return response.status_code, response.json()["detail"]


def validation_locs(response: httpx.Response) -> list[list[str | int]]:
    """The `loc` of each item, after checking FastAPI's standard 422 shape."""
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list)
    assert detail
    for item in detail:
        assert {"type", "loc", "msg"} <= set(item)
        assert isinstance(item["msg"], str)
        assert isinstance(item["type"], str)
    return [item["loc"] for item in detail]


# --- 400 -----------------------------------------------------------------------------------


def test_non_numeric_workspace_header_is_400(api: httpx.Client, world: World) -> None:
    values = ["abc", "1.5", "1e3", "0x10", "1_0", "", "12abc"]
    found = {
        value: error(
            get_data_as(api, {"X-API-Key": world.mine.key, "workspace_id": value}, world.source.id)
        )
        for value in values
    }
    assert found == dict.fromkeys(values, (400, "workspace_id must be a valid integer"))


def test_unknown_filter_field_is_400(api: httpx.Client, world: World) -> None:
    cases = {
        "pag": [("pag", "2")],
        "page_sise": [("page_sise", "5")],
        "amout": [("amout__gte", "1")],
        "Memo": [("Memo", "a")],
        "x__y": [("x__y__in", "1")],
    }
    found = {
        name: error(get_data_as(api, world.mine.headers, world.source.id, p))
        for name, p in cases.items()
    }
    assert found == {
        name: (400, f"Filter field '{name}' is not a valid column for this resource.")
        for name in cases
    }


def test_unknown_operator_is_400(api: httpx.Client, world: World) -> None:
    cases = {
        "foo": [("amount__foo", "1")],
        "contains": [("amount__contains", "1")],
        "GTE": [("id__GTE", "1")],
        "ne": [("memo__ne", "a")],
    }
    found = {
        op: error(get_data_as(api, world.mine.headers, world.source.id, p))
        for op, p in cases.items()
    }
    assert found == {op: (400, f"Operator '{op}' is not supported.") for op in cases}


def test_unknown_field_is_400(api: httpx.Client, world: World) -> None:
    cases = {"nope": "id,nope", "Id": "Id", "amount ": "amount ,id"}
    found = {
        name: error(get_data_as(api, world.mine.headers, world.source.id, [("fields", fields)]))
        for name, fields in cases.items()
    }
    assert found == {
        name: (400, f"Field '{name}' is not a valid column for this resource.") for name in cases
    }


def test_unknown_ordering_is_400(api: httpx.Client, world: World) -> None:
    cases = {"nope": "nope", "Amount": "-Amount", "amount,id": "amount,id", "-id": "--id"}
    found = {
        name: error(get_data_as(api, world.mine.headers, world.source.id, [("ordering", ordering)]))
        for name, ordering in cases.items()
    }
    assert found == {
        name: (400, f"Ordering field '{name}' is not a valid column for this resource.")
        for name in cases
    }


def test_system_columns_take_the_grammar_and_errors_of_an_integer_column(
    api: httpx.Client, world: World
) -> None:
    """`_row` and `_file_id` over HTTP: absent from a page unless named; named, filtered
    and ordered like an integer column, with that column's errors."""
    source, headers = world.source.id, world.mine.headers
    plain = get_data_as(api, headers, source).json()["data"]
    assert plain == [
        {"id": 1, "amount": 10.00, "memo": "a"},
        {"id": 2, "amount": 20.50, "memo": "b"},
    ]
    named = [("fields", "id,_row,_file_id"), ("ordering", "-_row"), ("_file_id", "")]
    rows = get_data_as(api, headers, source, named).json()["data"]
    assert [(r["id"], r["_file_id"]) for r in rows] == [(2, None), (1, None)]
    assert rows[0]["_row"] > rows[1]["_row"]
    after = [("_row__gt", str(rows[1]["_row"])), ("fields", "id")]
    assert get_data_as(api, headers, source, after).json()["data"] == [{"id": 2}]
    assert error(get_data_as(api, headers, source, [("_row", "1.5")])) == (400, NOT_APPLICABLE)
    assert error(get_data_as(api, headers, source, [("_file_id__gte", "")])) == (
        400,
        NOT_APPLICABLE,
    )
    assert error(get_data_as(api, headers, source, [("_row__like", "1")])) == (
        400,
        "Operator 'like' is not supported.",
    )
    assert error(get_data_as(api, headers, source, [("ordering", "_rows")])) == (
        400,
        "Ordering field '_rows' is not a valid column for this resource.",
    )


# --- 401, 403, 404 -------------------------------------------------------------------------


def test_missing_or_invalid_key_is_401(api: httpx.Client, world: World) -> None:
    workspace = {"workspace_id": str(world.mine.workspace_id)}
    cases: dict[str, dict[str, str]] = {
        "missing": workspace,
        "empty": {**workspace, "X-API-Key": ""},
        "unknown": {**workspace, "X-API-Key": "tly_" + "x" * 43},
        "garbage": {**workspace, "X-API-Key": "not a key at all"},
        "other case": {**workspace, "X-API-Key": world.mine.key.upper()},
    }
    found = {
        name: error(get_data_as(api, headers, world.source.id)) for name, headers in cases.items()
    }
    assert found == dict.fromkeys(cases, (401, "Could not validate credentials"))


def test_revoked_key_is_401(api: httpx.Client, runtime: Runtime, world: World) -> None:
    assert get_data_as(api, world.mine.headers, world.source.id).status_code == 200
    with runtime.engine.begin() as conn:
        conn.execute(
            update(api_keys)
            .where(api_keys.c.workspace_id == world.mine.workspace_id)
            .values(revoked_at=utc_now())
        )
    response = get_data_as(api, world.mine.headers, world.source.id)
    assert error(response) == (401, "Could not validate credentials")


def test_key_of_another_workspace_is_401(api: httpx.Client, world: World) -> None:
    headers = {"X-API-Key": world.other.key, "workspace_id": str(world.mine.workspace_id)}
    assert error(get_data_as(api, headers, world.source.id)) == (
        401,
        "Could not validate credentials",
    )
    assert error(get_data_as(api, headers, world.foreign.id)) == (
        401,
        "Could not validate credentials",
    )


def test_resource_of_another_workspace_is_403(api: httpx.Client, world: World) -> None:
    response = get_data_as(api, world.mine.headers, world.foreign.id)
    assert error(response) == (403, "Resource does not belong to the specified workspace")


def test_unknown_workspace_is_404(api: httpx.Client, world: World) -> None:
    ids = ["999999", "0", "-5", "+999999", "2147483648", "1" + "0" * 30]
    found = {
        wid: error(
            get_data_as(api, {"X-API-Key": world.mine.key, "workspace_id": wid}, world.source.id)
        )
        for wid in ids
    }
    assert found == dict.fromkeys(ids, (404, "Workspace not found"))


def test_unknown_resource_is_404(api: httpx.Client, world: World) -> None:
    ids = ["999999", "0", "-1", "2147483648", "1" + "0" * 30]
    found = {rid: error(get_data_as(api, world.mine.headers, rid)) for rid in ids}
    assert found == dict.fromkeys(ids, (404, "Resource not found"))


# --- 422 -----------------------------------------------------------------------------------


def test_missing_workspace_header_is_422_naming_the_header(api: httpx.Client, world: World) -> None:
    response = get_data_as(api, {"X-API-Key": world.mine.key}, world.source.id)
    assert validation_locs(response) == [["header", "workspace_id"]]
    assert response.json()["detail"][0]["type"] == "missing"


def test_bad_page_or_page_size_is_422_naming_the_parameter(api: httpx.Client, world: World) -> None:
    cases = [("page_size", "0"), ("page_size", "-1"), ("page_size", "abc"), ("page_size", "1.5")]
    cases += [("page", "0"), ("page", "-3"), ("page", "x"), ("page", "")]
    # Python's int() would take these; they are not numbers as the spec means them.
    cases += [("page", "1_0"), ("page", " 2"), ("page_size", "0_1"), ("page_size", "\u0661")]
    found = {
        (name, value): validation_locs(
            get_data_as(api, world.mine.headers, world.source.id, [(name, value)])
        )
        for name, value in cases
    }
    assert found == {(name, value): [["query", name]] for name, value in cases}


def test_non_numeric_resource_id_is_422_naming_the_path(api: httpx.Client, world: World) -> None:
    for rid in ("abc", "1.5", "1e3", "0_1", "1_0", "%201", "%D9%A1"):
        response = get_data_as(api, world.mine.headers, rid)
        assert validation_locs(response) == [["path", "resource_id"]]
        assert response.json()["detail"][0]["type"] == "int_parsing"


def test_spaces_around_header_values_are_not_part_of_them(api: httpx.Client, world: World) -> None:
    """RFC 9110: a field value excludes the whitespace around it, whatever the parser.
    Sent on a raw socket: httpx refuses to send such values."""
    request = (
        f"GET /api/v1/resources/{world.source.id}/data HTTP/1.1\r\n"
        f"Host: {api.base_url.host}\r\n"
        f"X-API-Key: {world.mine.key} \t\r\n"
        f"workspace_id: {world.mine.workspace_id}\t \r\n"
        "Connection: close\r\n\r\n"
    )
    with socket.create_connection((api.base_url.host, api.base_url.port), timeout=30) as sock:
        sock.sendall(request.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]


def test_workspace_id_in_query_string_fails_as_missing_header(
    api: httpx.Client, world: World
) -> None:
    alone = get_data_as(
        api, {"X-API-Key": world.mine.key}, world.source.id, [("workspace_id", "1")]
    )
    assert validation_locs(alone) == [["header", "workspace_id"]]
    params = [("workspace_id", str(world.mine.workspace_id))]
    both = get_data_as(api, world.mine.headers, world.source.id, params)
    assert validation_locs(both) == [["query", "workspace_id"]]


def test_workspace_id_in_query_string_is_never_a_filter(
    api: httpx.Client, runtime: Runtime, world: World
) -> None:
    source = make_source(runtime.engine, world.mine, "workspace_id,n\n1,1\n2,2\n")
    assert get_data_as(api, world.mine.headers, source.id, [("n", "1")]).status_code == 200
    response = get_data_as(api, world.mine.headers, source.id, [("workspace_id", "1")])
    assert validation_locs(response) == [["query", "workspace_id"]]


# --- the order of the checks ---------------------------------------------------------------


def test_checks_run_in_the_documented_order(api: httpx.Client, world: World) -> None:
    mine, other = world.mine, world.other
    bad_key = "tly_unknown"
    own_ws = str(mine.workspace_id)
    cases: dict[str, tuple[int | str, dict[str, str], Params, tuple[int, Any]]] = {
        "422 before a bad key": (world.source.id, {"X-API-Key": bad_key}, [], (422, "header")),
        "422 page_size before a bad workspace": (
            world.source.id,
            {"X-API-Key": bad_key, "workspace_id": "abc"},
            [("page_size", "0")],
            (422, "query"),
        ),
        "422 resource id before all": ("abc", {"workspace_id": "abc"}, [], (422, "path")),
        "400 workspace before a bad key": (
            world.source.id,
            {"X-API-Key": bad_key, "workspace_id": "abc"},
            [("nope", "1")],
            (400, "workspace_id must be a valid integer"),
        ),
        "400 workspace before a missing key": (
            world.source.id,
            {"workspace_id": "abc"},
            [],
            (400, "workspace_id must be a valid integer"),
        ),
        "401 missing key before unknown workspace": (
            999999,
            {"workspace_id": "999999"},
            [("nope", "1")],
            (401, "Could not validate credentials"),
        ),
        "401 unknown key before unknown workspace": (
            999999,
            {"X-API-Key": bad_key, "workspace_id": "999999"},
            [],
            (401, "Could not validate credentials"),
        ),
        "404 workspace before key-workspace match": (
            999999,
            {"X-API-Key": mine.key, "workspace_id": "999999"},
            [("nope", "1")],
            (404, "Workspace not found"),
        ),
        "401 other workspace before unknown resource": (
            999999,
            {"X-API-Key": mine.key, "workspace_id": str(other.workspace_id)},
            [],
            (401, "Could not validate credentials"),
        ),
        "401 other workspace before its own resource": (
            world.foreign.id,
            {"X-API-Key": mine.key, "workspace_id": str(other.workspace_id)},
            [],
            (401, "Could not validate credentials"),
        ),
        "404 resource before a bad filter": (
            999999,
            {"X-API-Key": mine.key, "workspace_id": own_ws},
            [("nope", "1"), ("fields", "nope")],
            (404, "Resource not found"),
        ),
        "403 before a bad filter": (
            world.foreign.id,
            mine.headers,
            [("nope", "1")],
            (403, "Resource does not belong to the specified workspace"),
        ),
        "403 before a bad operator, field, ordering and value": (
            world.foreign.id,
            mine.headers,
            [("amount__foo", "1"), ("fields", "x"), ("ordering", "y"), ("amount", "abc")],
            (403, "Resource does not belong to the specified workspace"),
        ),
        "400 value last, on an owned resource": (
            world.source.id,
            mine.headers,
            [("amount", "abc")],
            (400, NOT_APPLICABLE),
        ),
    }
    found = {}
    for name, (rid, headers, params, _) in cases.items():
        status, detail = error(get_data_as(api, headers, rid, params))
        found[name] = (status, detail[0]["loc"][0] if status == 422 else detail)
    assert found == {name: case[3] for name, case in cases.items()}


# --- 503 -----------------------------------------------------------------------------------


@contextmanager
def database_unreachable(
    request: pytest.FixtureRequest, backend: str, runtime: Runtime
) -> Iterator[None]:
    """Make the app's database unreachable, for real, and bring it back afterwards.

    PostgreSQL: the database stops accepting connections and the app's sessions are
    terminated. SQLite: the folder holding the database file disappears (a storage
    volume going away) before the app opens a connection.
    """
    if backend == "postgresql":
        server = request.getfixturevalue("postgres_server")
        name = runtime.settings.effective_database_url().rsplit("/", 1)[1]
        with psycopg.connect(server.url(), autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                [name],
            )
            yield
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
    else:
        home = runtime.settings.home
        away = home.with_name(home.name + "-away")
        home.rename(away)
        yield
        away.rename(home)


def test_unreachable_database_is_503_without_a_trace(
    request: pytest.FixtureRequest,
    backend: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client reads only "try again"; the log says why, for the operator."""
    settings = make_settings(request, backend, tmp_path / "h503")
    runtime = build_runtime(settings, migrate=False)  # no connection opened yet
    try:
        tenant = make_tenant(runtime.engine)
        source = make_source(runtime.engine, tenant, CSV)
        runtime.engine.dispose()  # the app starts without open connections
        with serve_app(create_app(settings, runtime)) as url, httpx.Client(base_url=url) as api:
            with database_unreachable(request, backend, runtime):
                for params in ([], [("amount__gt", "1")]):
                    response = get_data_as(api, tenant.headers, source.id, params)
                    assert response.status_code == 503
                    assert response.json() == {"detail": UNAVAILABLE}
                    assert "Traceback" not in response.text
                causes = [
                    getattr(r, "cause", "")
                    for r in caplog.records
                    if r.getMessage() == "storage_unavailable"
                ]
                assert len(causes) == 2
                assert all(causes)
                health = api.get("/health")  # does not check the data platform
                assert (health.status_code, health.json()) == (200, {"status": "ok"})
            assert get_data_as(api, tenant.headers, source.id).status_code == 200
    finally:
        runtime.close()
        shutil.rmtree(tmp_path / "h503-away", ignore_errors=True)
