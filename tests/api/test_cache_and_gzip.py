"""Data API response cache (keyed by data version, per workspace) and gzip compression.

The cache is observed without timing: rows written straight into a resource's table
behind tally's back (no data version bump) stay invisible to a cached request and
visible to any request that is not cached. Every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from zlib_ng import zlib_ng

from support.data_api import Params, get_data, ok_body
from support.factories import Tenant, make_source, make_tenant, write_file
from support.servers import serve_app
from tally.api.app import create_app
from tally.api.compression import GZIP_WBITS
from tally.runtime import Runtime
from tally.storage.resources import Resource

CSV = "id,memo\n1,alpha\n2,beta\n3,alpha\n"
ROW1, ROW2, ROW3 = {"id": 1, "memo": "alpha"}, {"id": 2, "memo": "beta"}, {"id": 3, "memo": "alpha"}


def ids(response: httpx.Response) -> list[int]:
    return [row["id"] for row in ok_body(response)["data"]]


def write_behind_tallys_back(runtime: Runtime, source: Resource, *rows: tuple[int, str]) -> None:
    """Insert rows without a load: the data version (and row count) stay as they were."""
    with runtime.engine.begin() as conn:
        for row_id, memo in rows:
            conn.execute(
                text(f"INSERT INTO {source.table_name} (c0, c1) VALUES (:id, :memo)"),
                {"id": row_id, "memo": memo},
            )


@pytest.fixture
def source(runtime: Runtime, tenant: Tenant) -> Resource:
    return make_source(runtime.engine, tenant, CSV)


# --- response cache ------------------------------------------------------------------------


def test_identical_request_is_served_from_the_cache(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, source: Resource
) -> None:
    params = [("memo", "alpha")]
    first = get_data(api, tenant, source.id, params)
    assert ids(first) == [1, 3]
    write_behind_tallys_back(runtime, source, (4, "alpha"))
    assert get_data(api, tenant, source.id, params).content == first.content
    # The row is there: a request that is not cached yet sees it.
    assert ids(get_data(api, tenant, source.id, [*params, ("page_size", "50")])) == [1, 3, 4]


def test_filter_order_in_the_url_hits_the_same_cache_entry(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, source: Resource
) -> None:
    params = [("memo__in", "alpha,beta"), ("id__gte", "2"), ("ordering", "-id")]
    first = get_data(api, tenant, source.id, params)
    assert ids(first) == [3, 2]
    write_behind_tallys_back(runtime, source, (4, "beta"))
    assert get_data(api, tenant, source.id, params[::-1]).content == first.content
    assert (
        get_data(api, tenant, source.id, [params[1], params[2], params[0]]).content == first.content
    )
    assert ids(get_data(api, tenant, source.id, [*params, ("page_size", "50")])) == [4, 3, 2]


def test_cache_key_tells_every_parameter_apart(
    api: httpx.Client, tenant: Tenant, source: Resource
) -> None:
    requests: dict[str, Params] = {
        "plain": [],
        "page": [("page", "2"), ("page_size", "1")],
        "page_size": [("page_size", "1")],
        "fields": [("fields", "memo")],
        "ordering": [("ordering", "-id")],
        "filter": [("memo", "beta")],
        "operator": [("id__gt", "1")],
        "value": [("id__gt", "2")],
        "in": [("id__in", "1,2")],
    }
    expected = {
        "plain": [
            ROW1,
            ROW2,
            ROW3,
        ],
        "page": [ROW2],
        "page_size": [ROW1],
        "fields": [{"memo": "alpha"}, {"memo": "beta"}, {"memo": "alpha"}],
        "ordering": [
            ROW3,
            ROW2,
            ROW1,
        ],
        "filter": [ROW2],
        "operator": [ROW2, ROW3],
        "value": [ROW3],
        "in": [ROW1, ROW2],
    }
    for _ in range(2):  # the second round is answered from the cache
        found = {
            name: ok_body(get_data(api, tenant, source.id, p))["data"]
            for name, p in requests.items()
        }
        assert found == expected


def test_new_load_is_visible_at_once(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, source: Resource
) -> None:
    params = [("memo", "alpha")]
    assert ok_body(get_data(api, tenant, source.id, params))["meta"]["total_count"] == 2
    assert ok_body(get_data(api, tenant, source.id))["meta"]["total_count"] == 3
    runtime.catalogue.append_file(source.id, write_file("id,memo\n4,alpha\n5,gamma\n"))
    after = ok_body(get_data(api, tenant, source.id, params))
    assert [row["id"] for row in after["data"]] == [1, 3, 4]
    assert after["meta"]["total_count"] == 3
    assert ids(get_data(api, tenant, source.id)) == [1, 2, 3, 4, 5]
    assert ok_body(get_data(api, tenant, source.id))["meta"]["total_count"] == 5


def test_count_memo_is_exact_after_a_new_load(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, source: Resource
) -> None:
    def meta(page: int) -> dict[str, Any]:
        params = [("memo", "alpha"), ("page_size", "1"), ("page", str(page))]
        result: dict[str, Any] = ok_body(get_data(api, tenant, source.id, params))["meta"]
        return result

    assert (meta(1)["total_count"], meta(2)["total_count"]) == (2, 2)  # second: memo hit
    runtime.catalogue.append_file(source.id, write_file("id,memo\n4,alpha\n5,alpha\n"))
    assert meta(2) == {
        "page": 2,
        "page_size": 1,
        "returned_count": 1,
        "total_count": 4,
        "total_pages": 4,
    }
    assert meta(4)["total_count"] == 4
    assert meta(5)["returned_count"] == 0


def test_cached_answer_never_crosses_workspaces(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, source: Resource
) -> None:
    other = make_tenant(runtime.engine)
    assert ids(get_data(api, tenant, source.id)) == [1, 2, 3]  # cached for the owner
    stolen = get_data(api, other, source.id)
    assert (stolen.status_code, stolen.json()) == (
        403,
        {"detail": "Resource does not belong to the specified workspace"},
    )
    borrowed = {"X-API-Key": other.key, "workspace_id": str(tenant.workspace_id)}
    response = api.get(f"/api/v1/resources/{source.id}/data", headers=borrowed)
    assert (response.status_code, response.json()) == (
        401,
        {"detail": "Could not validate credentials"},
    )
    keyless = api.get(
        f"/api/v1/resources/{source.id}/data",
        headers={"workspace_id": str(tenant.workspace_id)},
    )
    assert keyless.status_code == 401


@pytest.fixture
def uncached_api(uncached: Runtime) -> Iterator[tuple[Runtime, httpx.Client]]:
    """conftest's runtime with the response cache off, served on a loopback port."""
    app = create_app(uncached.settings, uncached)
    with serve_app(app) as url, httpx.Client(base_url=url) as api:
        yield uncached, api


def test_cache_can_be_switched_off(uncached_api: tuple[Runtime, httpx.Client]) -> None:
    runtime, api = uncached_api
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    params = [("memo", "alpha"), ("ordering", "-id")]
    assert ids(get_data(api, tenant, source.id, params)) == [3, 1]
    write_behind_tallys_back(runtime, source, (4, "alpha"))
    assert ids(get_data(api, tenant, source.id, params)) == [4, 3, 1]


# --- gzip ----------------------------------------------------------------------------------


def big_source(runtime: Runtime, tenant: Tenant) -> Resource:
    rows = "".join(f"{n},memo number {n} with some text\n" for n in range(1, 201))
    return make_source(runtime.engine, tenant, "id,memo\n" + rows)


def raw_get(api: httpx.Client, url: str, headers: dict[str, str]) -> tuple[httpx.Response, bytes]:
    """The response and its body exactly as sent on the wire (not decoded)."""
    with api.stream("GET", url, headers=headers) as response:
        return response, b"".join(response.iter_raw())


def test_large_response_is_gzipped_when_accepted(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = big_source(runtime, tenant)
    url = f"/api/v1/resources/{source.id}/data"
    plain, plain_bytes = raw_get(api, url, {**tenant.headers, "Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert len(plain_bytes) > 1024
    zipped, wire = raw_get(api, url, {**tenant.headers, "Accept-Encoding": "gzip"})
    assert zipped.status_code == 200
    assert zipped.headers["content-encoding"] == "gzip"
    assert len(wire) < len(plain_bytes)
    assert gzip.decompress(wire) == plain_bytes
    assert len(json.loads(plain_bytes)["data"]) == 200


def test_no_gzip_without_accept_encoding(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = big_source(runtime, tenant)
    request = api.build_request(
        "GET", f"/api/v1/resources/{source.id}/data", headers=tenant.headers
    )
    del request.headers["accept-encoding"]
    response = api.send(request)
    assert response.status_code == 200
    assert "content-encoding" not in response.headers
    assert len(response.json()["data"]) == 200


def test_small_responses_are_not_compressed(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = big_source(runtime, tenant)
    url = f"/api/v1/resources/{source.id}/data"
    gzip_ok = {**tenant.headers, "Accept-Encoding": "gzip"}
    page, wire = raw_get(api, f"{url}?page_size=1", gzip_ok)
    assert page.status_code == 200
    assert "content-encoding" not in page.headers
    assert json.loads(wire)["data"] == [{"id": 1, "memo": "memo number 1 with some text"}]
    failure, wire = raw_get(api, f"{url}?nope=1", gzip_ok)
    assert failure.status_code == 400
    assert "content-encoding" not in failure.headers
    assert json.loads(wire) == {
        "detail": "Filter field 'nope' is not a valid column for this resource."
    }


def test_data_bodies_are_gzipped_at_the_configured_level(runtime: Runtime, tenant: Tenant) -> None:
    """TALLY_GZIP_LEVEL reaches the Data API's own compressor, not only the middleware."""
    source = big_source(runtime, tenant)
    url = f"/api/v1/resources/{source.id}/data"
    at_level_9 = runtime.settings.model_copy(update={"gzip_level": 9})
    with (
        serve_app(create_app(at_level_9, runtime)) as served,
        httpx.Client(base_url=served) as api,
    ):
        _plain, plain_bytes = raw_get(api, url, {**tenant.headers, "Accept-Encoding": "identity"})
        zipped, wire = raw_get(api, url, {**tenant.headers, "Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert gzip.decompress(wire) == plain_bytes
    assert wire == zlib_ng.compress(plain_bytes, 9, wbits=GZIP_WBITS)
    assert len(wire) < len(zlib_ng.compress(plain_bytes, 1, wbits=GZIP_WBITS))


@pytest.mark.parametrize(
    ("accept_encoding", "gzipped"),
    [
        ("gzip", True),
        ("gzip;q=0.5", True),
        ("x-gzip", True),
        ("*", True),
        ("br, *;q=0.1", True),
        ("*;q=0, gzip", True),  # gzip's own entry decides
        ("gzip;q=0", False),
        ("GZIP; Q=0", False),
        ("identity, gzip;q=0", False),
        ("gzip;q=0, *", False),
        ("*;q=0", False),
        ("br, deflate", False),
        ("gzip;q=oops", False),
    ],
)
def test_gzip_only_when_accepted_by_its_weight(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, accept_encoding: str, gzipped: bool
) -> None:
    """Both compressors (the Data API's own, and the middleware for every other answer,
    such as the OpenAPI document) read Accept-Encoding the same way; Vary is said once."""
    source = big_source(runtime, tenant)
    headers = {"Accept-Encoding": accept_encoding}
    for url, extra in (
        (f"/api/v1/resources/{source.id}/data", tenant.headers),
        ("/api/v1/openapi.json", {}),
    ):
        response, wire = raw_get(api, url, {**extra, **headers})
        assert response.status_code == 200
        assert response.headers.get("content-encoding") == ("gzip" if gzipped else None), url
        assert json.loads(gzip.decompress(wire) if gzipped else wire)
        if url.startswith("/api/v1/resources") or gzipped:
            assert response.headers.get_list("vary") == ["Accept-Encoding"], url


def test_the_middleware_compresses_with_zlib_ng(api: httpx.Client, runtime: Runtime) -> None:
    """Every answer the middleware gzips (here the OpenAPI document) is zlib-ng's bytes.
    `ZlibNgGZipResponder` swaps the compressor through Starlette's `compressor` property
    and its private `_compressor`: should a Starlette release rename either, the answer
    would silently be zlib's again, and this test fails (the two differ byte for byte)."""
    _plain, plain_bytes = raw_get(api, "/api/v1/openapi.json", {"Accept-Encoding": "identity"})
    zipped, wire = raw_get(api, "/api/v1/openapi.json", {"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert gzip.decompress(wire) == plain_bytes
    level = runtime.settings.gzip_level
    by_zlib_ng = zlib_ng.compressobj(level, zlib_ng.DEFLATED, GZIP_WBITS)
    assert wire == by_zlib_ng.compress(plain_bytes) + by_zlib_ng.flush()
    by_zlib = zlib.compressobj(level, zlib.DEFLATED, GZIP_WBITS)
    assert wire != by_zlib.compress(plain_bytes) + by_zlib.flush()
