"""The Data API through its production default: queries run in a pool of spawned query
processes (TALLY_QUERY_PROCESSES), on SQLite and PostgreSQL.

The rest of the API suite runs queries in the API process's threads (0) to keep each
test app cheap; these tests check that the pool answers exactly the same, carries the
spec's errors across the process boundary, sees new data at once (each process has its
own response cache), and survives its processes being killed.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from zlib_ng import zlib_ng

from support.data_api import get_data
from support.databases import make_settings
from support.factories import make_source, make_tenant, write_file
from support.servers import serve_app
from tally.api.app import create_app
from tally.api.compression import GZIP_WBITS, deflate_piece, gzip_of_pieces, inflate_piece
from tally.api.queries.page_parts import SPLIT_MIN_ROWS
from tally.api.queries.pool import QueryProcessPool
from tally.api.queries.processes import QueryProcesses
from tally.api.queries.runner import default_query_processes
from tally.runtime import Runtime, build_runtime
from tally.services.page_bodies import PagePart, stitch_parts

CSV = "id,amount,memo\n" + "".join(f"{n},{n}.{n % 100:02d},memo {n % 7}\n" for n in range(1, 301))
PROCESSES = 2


def _served_with_pool(
    request: pytest.FixtureRequest, backend: str, home: Path, **overrides: object
) -> Iterator[tuple[Runtime, httpx.Client, QueryProcesses]]:
    """tally served with its query processes; the pool too, to see how it read."""
    settings = make_settings(request, backend, home, query_processes=PROCESSES, **overrides)
    runtime = build_runtime(settings)
    app = create_app(settings, runtime)
    try:
        with (
            serve_app(app, lifespan=True) as url,
            httpx.Client(base_url=url, timeout=60) as api,
        ):
            yield runtime, api, app.state.queries
    finally:
        runtime.close()


def _served(
    request: pytest.FixtureRequest, backend: str, home: Path, **overrides: object
) -> Iterator[tuple[Runtime, httpx.Client]]:
    for runtime, api, _queries in _served_with_pool(request, backend, home, **overrides):
        yield runtime, api


@pytest.fixture
def pooled(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[Runtime, httpx.Client]]:
    yield from _served(request, backend, tmp_path / "pooled")


def _children() -> set[int]:
    """This process's child processes (the query processes among them)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            found.update(int(pid) for pid in (task / "children").read_text().split())
        except FileNotFoundError:
            continue  # a thread that ended while we looked
    return found


def _spawned_query_processes() -> set[int]:
    pids = set()
    for pid in _children():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"multiprocessing.spawn" in cmdline and b"resource_tracker" not in cmdline:
            pids.add(pid)
    return pids


QUERIES: list[list[tuple[str, str]]] = [
    [],
    [("amount__gte", "100.5"), ("amount__lt", "200"), ("fields", "id,amount")],
    [("memo__in", "memo 1,memo 3"), ("ordering", "-amount"), ("page", "2"), ("page_size", "7")],
    [("ordering", "id"), ("page", "3"), ("page_size", "100")],
]


@contextmanager
def _served_in_threads(runtime: Runtime) -> Iterator[httpx.Client]:
    """The same database, read by an app whose queries run in its own threads: the
    reference a pooled answer must equal byte for byte."""
    threaded = runtime.settings.model_copy(update={"query_processes": 0})
    reference = build_runtime(threaded)
    try:
        with (
            serve_app(create_app(threaded, reference)) as url,
            httpx.Client(base_url=url) as client,
        ):
            yield client
    finally:
        reference.close()


def test_the_pool_answers_exactly_what_threads_answer(
    pooled: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    with _served_in_threads(runtime) as other:
        for params in QUERIES:
            pooled_answer = get_data(api, tenant, source.id, params)
            threaded_answer = get_data(other, tenant, source.id, params)
            assert pooled_answer.status_code == 200, pooled_answer.text
            assert pooled_answer.content == threaded_answer.content
            assert pooled_answer.headers.get("content-encoding") == threaded_answer.headers.get(
                "content-encoding"
            )
    assert len(_spawned_query_processes()) >= PROCESSES


def test_large_pages_are_gzipped_in_the_query_process(pooled: tuple[Runtime, httpx.Client]) -> None:
    runtime, api = pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    url = f"/api/v1/resources/{source.id}/data"
    with api.stream("GET", url, headers={**tenant.headers, "Accept-Encoding": "gzip"}) as response:
        raw = b"".join(response.iter_raw())
    assert response.headers["content-encoding"] == "gzip"
    assert response.headers["vary"] == "Accept-Encoding"
    assert len(gzip.decompress(raw)) > len(raw)
    plain = api.get(url, headers={**tenant.headers, "Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert gzip.decompress(raw) == plain.content


@pytest.mark.parametrize(
    ("change", "status", "detail"),
    [
        ({"key": "tly_not-a-key"}, 401, "Could not validate credentials"),
        ({"workspace": "999999"}, 404, "Workspace not found"),
        ({"resource": 999999}, 404, "Resource not found"),
        (
            {"params": [("nope", "1")]},
            400,
            "Filter field 'nope' is not a valid column for this resource.",
        ),
        (
            {"params": [("amount", "ten")]},
            400,
            "The requested filters or ordering could not be applied.",
        ),
    ],
)
def test_errors_cross_the_process_boundary_as_the_spec_states(
    pooled: tuple[Runtime, httpx.Client], change: dict[str, Any], status: int, detail: str
) -> None:
    runtime, api = pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    headers = {
        "X-API-Key": change.get("key", tenant.key),
        "workspace_id": change.get("workspace", str(tenant.workspace_id)),
    }
    response = api.get(
        f"/api/v1/resources/{change.get('resource', source.id)}/data",
        params=tuple(change.get("params", [])),
        headers=headers,
    )
    assert (response.status_code, response.json()) == (status, {"detail": detail})


def test_another_workspaces_resource_is_forbidden_through_the_pool(
    pooled: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = pooled
    owner, stranger = make_tenant(runtime.engine), make_tenant(runtime.engine)
    source = make_source(runtime.engine, owner, CSV)
    assert get_data(api, owner, source.id, []).status_code == 200  # cached in some process now
    response = get_data(api, stranger, source.id, [])
    assert (response.status_code, response.json()) == (
        403,
        {"detail": "Resource does not belong to the specified workspace"},
    )


def test_new_data_is_visible_at_once_in_every_query_process(
    pooled: tuple[Runtime, httpx.Client],
) -> None:
    runtime, api = pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, "id,amount,memo\n1,1.00,a\n")
    params = [("ordering", "-id")]
    for _ in range(4 * PROCESSES):  # every process answers, and caches, the old version
        assert [row["id"] for row in get_data(api, tenant, source.id, params).json()["data"]] == [1]
    path = write_file("id,amount,memo\n2,2.00,b\n")
    try:
        runtime.catalogue.append_file(source.id, path)
    finally:
        path.unlink()
    for _ in range(4 * PROCESSES):
        assert [row["id"] for row in get_data(api, tenant, source.id, params).json()["data"]] == [
            2,
            1,
        ]


def test_a_killed_query_process_costs_no_request(pooled: tuple[Runtime, httpx.Client]) -> None:
    runtime, api = pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    assert get_data(api, tenant, source.id, []).status_code == 200
    victims = _spawned_query_processes()
    assert victims
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    answers = [get_data(api, tenant, source.id, [("page_size", "5")]) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [row["id"] for row in answers[0].json()["data"]] == [1, 2, 3, 4, 5]
    assert _spawned_query_processes().isdisjoint(victims)


@pytest.mark.parametrize(
    ("cpus", "api_processes", "expected"),
    [(2, 1, 2), (2, 2, 1), (8, 2, 4), (2, 4, 1), (1, 1, 1)],
)
def test_query_processes_share_the_cpus_among_api_processes(
    cpus: int, api_processes: int, expected: int
) -> None:
    assert default_query_processes(cpus, api_processes) == expected


@pytest.fixture
def pooled_uncached(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[Runtime, httpx.Client]]:
    yield from _served(request, backend, tmp_path / "uncached", response_cache=False)


def test_a_filter_set_is_counted_once_whichever_process_answers(
    pooled_uncached: tuple[Runtime, httpx.Client],
) -> None:
    """Rows written behind tally's back (no new data version) show whether a count was
    computed again: every process must answer with the count the first one paid for."""
    runtime, api = pooled_uncached
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, CSV)
    params = [("memo", "memo 3"), ("page_size", "1")]
    first = get_data(api, tenant, source.id, params).json()["meta"]["total_count"]
    with runtime.engine.begin() as conn:
        conn.execute(
            text(f"INSERT INTO {source.table_name} (c0, c1, c2) VALUES (999, 100, 'memo 3')")
        )
    for _ in range(6 * PROCESSES):  # the filters in another order: the same filter set
        shuffled = [("page_size", "1"), ("memo", "memo 3")]
        assert get_data(api, tenant, source.id, shuffled).json()["meta"]["total_count"] == first
    other_filter = get_data(api, tenant, source.id, [("memo", "memo 4")]).json()["meta"]
    assert other_filter["total_count"] == sum(1 for n in range(1, 301) if n % 7 == 4)
    path = write_file("id,amount,memo\n1000,1.00,memo 3\n")
    try:
        runtime.catalogue.append_file(source.id, path)  # a new data version
    finally:
        path.unlink()
    for _ in range(2 * PROCESSES):  # no count of the old version is handed on
        total = get_data(api, tenant, source.id, params).json()["meta"]["total_count"]
        assert total == first + 2  # the row behind tally's back and the appended one


# --- large pages read in parts ---------------------------------------------------------

BIG_ROWS = 9001
BIG_CSV = "id,amount,memo\n" + "".join(
    f"{n},{n % 500}.{n % 100:02d},memo {n % 7}\n" for n in range(1, BIG_ROWS + 1)
)
BIG_QUERIES: list[list[tuple[str, str]]] = [
    [("page_size", "10000")],  # the whole resource
    [("page_size", "5000"), ("page", "2")],  # a last page of 4001 rows
    [("page_size", "4000"), ("page", "3")],  # the second part past the last row
    [("page_size", "4000"), ("page", "4")],  # past the last row altogether
    [("ordering", "-amount"), ("page_size", "6000"), ("fields", "memo,id")],
    [("memo__in", "memo 1,memo 2,memo 3"), ("ordering", "amount"), ("page_size", "9999")],
]


@pytest.fixture
def split_pooled(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[Runtime, httpx.Client, QueryProcesses]]:
    yield from _served_with_pool(request, backend, tmp_path / "split")


def test_large_pages_read_in_parts_answer_what_a_whole_read_answers(
    split_pooled: tuple[Runtime, httpx.Client, QueryProcesses],
) -> None:
    runtime, api, queries = split_pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, BIG_CSV)
    with _served_in_threads(runtime) as other:
        for params in BIG_QUERIES:
            for encoding in ("gzip", "identity"):
                headers = {**tenant.headers, "Accept-Encoding": encoding}
                route = f"/api/v1/resources/{source.id}/data"
                parts = api.get(route, params=tuple(params), headers=headers)
                whole = other.get(route, params=tuple(params), headers=headers)
                assert parts.status_code == 200, parts.text
                assert parts.content == whole.content, params
                assert parts.headers.get("content-encoding") == whole.headers.get(
                    "content-encoding"
                )
    assert queries.pages_read_in_parts == 2 * len(BIG_QUERIES)
    small = get_data(api, tenant, source.id, [("page_size", str(SPLIT_MIN_ROWS - 1))])
    assert small.json()["meta"]["returned_count"] == SPLIT_MIN_ROWS - 1
    assert queries.pages_read_in_parts == 2 * len(BIG_QUERIES)  # read whole


def test_a_page_read_in_parts_is_served_from_the_cache_afterwards(
    split_pooled: tuple[Runtime, httpx.Client, QueryProcesses],
) -> None:
    """A value changed behind tally's back (no new data version) shows whether the
    second answer came from the response cache."""
    runtime, api, queries = split_pooled
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, BIG_CSV)
    params = [("page_size", "10000")]
    first = get_data(api, tenant, source.id, params)
    with runtime.engine.begin() as conn:
        # as every change of stored values does, the row's stored JSON text goes too
        conn.execute(
            text(f"UPDATE {source.table_name} SET c2 = 'changed', _json = NULL WHERE c0 = 1")
        )
    for _ in range(3):
        assert get_data(api, tenant, source.id, params).content == first.content
    assert queries.pages_read_in_parts == 4
    path = write_file("id,amount,memo\n9002,1.00,b\n")
    try:
        runtime.catalogue.append_file(source.id, path)  # a new data version
    finally:
        path.unlink()
    rows = get_data(api, tenant, source.id, params).json()["data"]
    assert (rows[0]["memo"], len(rows)) == ("changed", BIG_ROWS + 1)


@pytest.mark.parametrize(
    ("params", "status", "detail"),
    [
        ([("nope", "1")], 400, "Filter field 'nope' is not a valid column for this resource."),
        ([("amount", "ten")], 400, "The requested filters or ordering could not be applied."),
    ],
)
def test_errors_of_a_page_read_in_parts_are_the_spec_errors(
    split_pooled: tuple[Runtime, httpx.Client, QueryProcesses],
    params: list[tuple[str, str]],
    status: int,
    detail: str,
) -> None:
    runtime, api, _queries = split_pooled
    owner, stranger = make_tenant(runtime.engine), make_tenant(runtime.engine)
    source = make_source(runtime.engine, owner, BIG_CSV)
    response = get_data(api, owner, source.id, [*params, ("page_size", "10000")])
    assert (response.status_code, response.json()) == (status, {"detail": detail})
    forbidden = get_data(api, stranger, source.id, [("page_size", "10000")])
    assert (forbidden.status_code, forbidden.json()) == (
        403,
        {"detail": "Resource does not belong to the specified workspace"},
    )


def _part(rows: bytes, returned: int, *, version: int = 3, total: int = 9) -> PagePart:
    return PagePart(rows, returned, total, 2, 4, version, ("key",))


def test_parts_are_stitched_only_when_they_read_the_same_data() -> None:
    parts = [_part(b"", 0), _part(b'{"a":1},{"a":2}', 2), _part(b"", 0), _part(b'{"a":3}', 1)]
    stitched = stitch_parts(parts)
    assert stitched is not None
    assert json.loads(stitched.body([p.rows for p in parts])) == {
        "data": [{"a": 1}, {"a": 2}, {"a": 3}],
        "meta": {
            "page": 2,
            "page_size": 4,
            "returned_count": 3,
            "total_count": 9,
            "total_pages": 3,
        },
    }
    assert stitch_parts([_part(b'{"a":1}', 1), _part(b'{"a":2}', 1, version=4)]) is None
    assert stitch_parts([_part(b'{"a":1}', 1), _part(b'{"a":2}', 1, total=10)]) is None


@pytest.fixture
def split_pooled_uncached(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[Runtime, httpx.Client, QueryProcesses]]:
    yield from _served_with_pool(request, backend, tmp_path / "split", response_cache=False)


def test_parts_compressed_apart_make_one_gzip_body(
    split_pooled_uncached: tuple[Runtime, httpx.Client, QueryProcesses],
) -> None:
    """Without the response cache, each part gzips its own rows and the API process
    joins the pieces: the body on the wire must be one gzip member any client reads."""
    runtime, api, queries = split_pooled_uncached
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, BIG_CSV)
    route = f"/api/v1/resources/{source.id}/data"
    for params in BIG_QUERIES:
        with api.stream(
            "GET",
            route,
            params=tuple(params),
            headers={**tenant.headers, "Accept-Encoding": "gzip"},
        ) as response:
            raw = b"".join(response.iter_raw())
        plain = api.get(
            route, params=tuple(params), headers={**tenant.headers, "Accept-Encoding": "identity"}
        )
        if response.headers.get("content-encoding") == "gzip":
            stream = zlib.decompressobj(zlib.MAX_WBITS | 16)  # one member, as httpx reads it
            assert stream.decompress(raw) == plain.content, params
            assert stream.eof
            assert not stream.unused_data
            assert gzip.decompress(raw) == plain.content
        else:  # a page past the last row: too small to compress
            assert raw == plain.content
            assert plain.json()["meta"]["returned_count"] == 0
    assert queries.pages_read_in_parts == 2 * len(BIG_QUERIES)


@pytest.fixture
def split_pooled_at_level_9(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[tuple[Runtime, httpx.Client, QueryProcesses]]:
    yield from _served_with_pool(
        request, backend, tmp_path / "level9", response_cache=False, gzip_level=9
    )


def test_query_processes_gzip_at_the_configured_level(
    split_pooled_at_level_9: tuple[Runtime, httpx.Client, QueryProcesses],
) -> None:
    """TALLY_GZIP_LEVEL reaches the query processes: a page read whole is gzipped at it,
    and so are the rows of a page read in parts (smaller than level 1 could make them)."""
    runtime, api, queries = split_pooled_at_level_9
    tenant = make_tenant(runtime.engine)
    source = make_source(runtime.engine, tenant, BIG_CSV)
    route = f"/api/v1/resources/{source.id}/data"
    for page_size in ("1000", "10000"):  # read whole, read in parts
        headers = {**tenant.headers, "Accept-Encoding": "gzip"}
        with api.stream("GET", route, params={"page_size": page_size}, headers=headers) as zipped:
            wire = b"".join(zipped.iter_raw())
        plain = api.get(
            route,
            params={"page_size": page_size},
            headers={**tenant.headers, "Accept-Encoding": "identity"},
        ).content
        assert zipped.headers["content-encoding"] == "gzip"
        assert gzip.decompress(wire) == plain
        assert len(wire) < len(zlib_ng.compress(plain, 1, wbits=GZIP_WBITS))
        if page_size == "1000":
            assert wire == zlib_ng.compress(plain, 9, wbits=GZIP_WBITS)
    assert queries.pages_read_in_parts == 2  # both answers of 10,000 rows


@pytest.mark.parametrize(
    "chunks",
    [[b"a"], [b"", b"x" * 70000, b",", b""], [b'{"data":[', b"1,2", b",", b"3", b"]}"]],
)
@pytest.mark.parametrize("level", [1, 9])
def test_deflated_pieces_join_into_one_gzip_member(chunks: list[bytes], level: int) -> None:
    joined = gzip_of_pieces([deflate_piece(c, level) for c in chunks])
    stream = zlib.decompressobj(zlib.MAX_WBITS | 16)
    assert stream.decompress(joined) == b"".join(chunks)
    assert stream.eof
    assert not stream.unused_data
    assert [inflate_piece(deflate_piece(c, level)) for c in chunks] == chunks


def _starting_query_process(home: Path, api_process: str) -> subprocess.Popen[bytes]:
    """A process that starts as a query process does, told `api_process` is its API
    process, then idles as a query process waiting for work would."""
    code = (
        "import os, sys, time\n"
        "from tally.api.queries.query_process import start_query_process\n"
        "from tally.settings import load_settings\n"
        f"start_query_process(load_settings(), {api_process})\n"
        "time.sleep(60)\n"
        "sys.exit(3)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "TALLY_HOME": str(home)}
    )


def test_a_query_process_whose_api_process_is_already_gone_exits(tmp_path: Path) -> None:
    """A query process may finish starting after its API process was killed (seen on a
    loaded machine): it must compare its parent with the API process's id it was given,
    not with the parent it finds when it starts (init by then), or it never exits."""
    orphan = _starting_query_process(tmp_path, "os.getppid() + 999999")
    assert orphan.wait(timeout=30) == 0
    child = _starting_query_process(tmp_path, "os.getppid()")  # its API process lives
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(timeout=3)
    finally:
        child.kill()
        child.wait()


# --- the pool itself ----------------------------------------------------------------------


def test_the_pool_answers_each_call_with_its_own_answer_and_error(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Calls queue at a process and come back in order over its socket: many at once get
    their own answers, an exception is raised in its caller, and a caller cancelled
    while its call runs leaves nothing unread for the next one."""
    settings = make_settings(request, "sqlite", tmp_path / "home", query_processes=PROCESSES)
    build_runtime(settings).close()  # the database the query processes open

    async def scenario() -> None:
        pool = QueryProcessPool(settings, PROCESSES)
        await pool.start()
        try:
            answers = await asyncio.gather(*(pool.call(pow, n, 2) for n in range(40)))
            assert answers == [n * n for n in range(40)]
            with pytest.raises(ValueError, match="invalid literal"):
                await pool.call(int, "not a number")
            pids = set(await asyncio.gather(*(pool.call(os.getpid) for _ in range(PROCESSES))))
            assert len(pids) == PROCESSES  # calls at once go to different processes
            assert os.getpid() not in pids
            slow = [asyncio.create_task(pool.call(time.sleep, 0.3)) for _ in range(PROCESSES)]
            # One turn of the loop runs each task up to its answer: its call is sent (a
            # call writes before it first waits), and its answer will come.
            await asyncio.sleep(0)
            assert not any(task.done() for task in slow)
            for task in slow:
                task.cancel()
            assert await asyncio.gather(*(pool.call(abs, -n) for n in range(6))) == list(range(6))
        finally:
            pool.close()

    asyncio.run(scenario())
