"""Slow previews beside everything else (issue #30, point 6 and point 3's clause), over
real HTTP on both backends.

A preview runs on a thread and a database connection of its own, at most
TALLY_PREVIEW_WORKSPACE_CONCURRENCY of one workspace's and TALLY_PREVIEW_CONCURRENCY in
all at once; one more is refused at once (429 / 503, Retry-After) while notifications,
Data API reads, /api/v2 reads and /health are answered.

The previews here never end on their own (every row of a 1,000-row input against itself
four times, the time limit ten minutes): the slots they hold are known without timing,
and `Previews.close` (what a stopping process does) ends them.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import psycopg
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from support.databases import BACKENDS, make_settings, setup_engine
from support.factories import Tenant, make_source, make_tenant
from support.processes import notify, register_webhook
from support.servers import serve_app
from support.waiting import eventually
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime

PREVIEW = "/api/v2/transformations/preview"
ROWS_CSV = "n\n" + "".join(f"{i}\n" for i in range(1000))
ENDLESS_SQL = (
    "SELECT COUNT(*) AS pairs FROM s AS a JOIN s AS b ON TRUE JOIN s AS c ON TRUE "
    "JOIN s AS d ON TRUE"
)
UNAVAILABLE = "Data platform is temporarily unavailable. Please try again later."
ANSWER_SECONDS = 60  # an answer that never comes fails the test, it does not hang it


@pytest.fixture
def busy(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Runtime]:
    """Three preview slots, two a workspace; one API connection (PostgreSQL: two with
    the overflow), so previews on the API's pool would leave nothing to the rest."""
    settings = make_settings(
        request,
        backend,
        tmp_path / "home",
        preview_concurrency=3,
        preview_workspace_concurrency=2,
        transformation_timeout_seconds=600,
        database_pool_size=1,
    )
    runtime = build_runtime(settings)
    yield runtime
    runtime.close()


def with_two_request_threads(app: ASGIApp) -> ASGIApp:
    """`app` with anyio's threads for requests (40 by default: each /api/v2 request's key
    check and service call take one) cut to two, fewer than the previews that will run:
    were a preview to hold one, the requests that need them would wait as long."""

    async def limited(scope: Scope, receive: Receive, send: Send) -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = 2  # this loop's
        await app(scope, receive, send)

    return limited


def preview(client: httpx.Client, tenant: Tenant, source_id: int, sql: str) -> httpx.Response:
    body = {"name": "slow", "inputs": {"s": source_id}, "sql": sql}
    return client.post(PREVIEW, json=body, headers=tenant.v2_headers)


def first_answers(futures: list[Future[httpx.Response]], count: int) -> list[httpx.Response]:
    """The first `count` answers to come back."""
    answers = as_completed(futures, timeout=ANSWER_SECONDS)
    return [next(answers).result() for _ in range(count)]


def refused(answer: httpx.Response, status: int) -> bool:
    return (
        answer.status_code == status
        and int(answer.headers["Retry-After"]) >= 1
        and len(answer.json()["errors"]) == 1
    )


def test_previews_past_their_limits_are_refused_while_the_rest_is_answered(busy: Runtime) -> None:
    with setup_engine(busy.settings) as engine:
        first = make_tenant(engine, ingestion=True)
        second = make_tenant(engine)
        first_input = make_source(engine, first, ROWS_CSV, name="numbers").id
        second_input = make_source(engine, second, ROWS_CSV, name="numbers").id
    with (
        serve_app(with_two_request_threads(create_app(busy.settings, busy))) as url,
        httpx.Client(base_url=url, timeout=ANSWER_SECONDS) as client,
        ThreadPoolExecutor(max_workers=6) as callers,
    ):
        hook = register_webhook(client, first, "bank", file_mapping={"url_field": "file_url"})
        firsts = [
            callers.submit(preview, client, first, first_input, ENDLESS_SQL) for _ in range(4)
        ]
        # Two run (and go on running): the other two are refused at once.
        assert all(refused(a, 429) for a in first_answers(firsts, 2))
        seconds = [
            callers.submit(preview, client, second, second_input, ENDLESS_SQL) for _ in range(2)
        ]
        # The second workspace's first takes the last slot of the process.
        assert all(refused(a, 503) for a in first_answers(seconds, 1))
        assert len([f for f in firsts + seconds if not f.done()]) == 3

        # Meanwhile: a notification, the Data API, an /api/v2 read, /health.
        assert notify(client, hook["webhook_id"], "https://bank.example/a.csv").status_code == 200
        data = client.get(f"/api/v1/resources/{first_input}/data", headers=first.headers)
        assert (data.status_code, data.json()["meta"]["total_count"]) == (200, 1000)
        listed = client.get("/api/v2/transformations", headers=second.v2_headers)
        assert (listed.status_code, listed.json()["data"]) == (200, [])
        assert client.get("/health").status_code == 200

        busy.previews.close()  # as a stopping process does: the three end, 503
        answers = [f.result() for f in firsts + seconds]
        assert sorted(a.status_code for a in answers) == [429, 429, 503, 503, 503, 503]
        assert all(refused(a, a.status_code) for a in answers)  # no 500 among them
        assert refused(preview(client, second, second_input, "SELECT s.n FROM s"), 503)


def test_the_preview_documents_its_refusals(api: httpx.Client) -> None:
    responses: dict[str, Any] = api.get("/api/v1/openapi.json").json()["paths"][PREVIEW]["post"][
        "responses"
    ]
    for status in ("429", "503"):
        assert "Retry-After" in responses[status]["headers"], status
    assert "TALLY_PREVIEW_WORKSPACE_CONCURRENCY" in responses["429"]["description"]
    assert "TALLY_PREVIEW_CONCURRENCY" in responses["503"]["description"]


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "postgresql"])
def test_a_preview_whose_connection_is_lost_is_503(
    busy: Runtime, request: pytest.FixtureRequest
) -> None:
    """The server ends the preview's session mid-query (a restart, a failover): the
    database is unavailable, not the query wrong (400) nor tally broken (500)."""
    with setup_engine(busy.settings) as engine:
        tenant = make_tenant(engine)
        source_id = make_source(engine, tenant, ROWS_CSV, name="numbers").id
    server = request.getfixturevalue("postgres_server")
    database = busy.settings.effective_database_url().rsplit("/", 1)[1]
    with (
        serve_app(create_app(busy.settings, busy)) as url,
        httpx.Client(base_url=url, timeout=ANSWER_SECONDS) as client,
        ThreadPoolExecutor(max_workers=1) as caller,
        psycopg.connect(server.url(), autocommit=True) as admin,
    ):
        answer = caller.submit(preview, client, tenant, source_id, ENDLESS_SQL)

        def running() -> list[Any]:
            return admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND state = 'active' AND query LIKE 'WITH q %%'",
                (database,),
            ).fetchall()

        eventually(running, timeout=ANSWER_SECONDS, what="the preview's query, ended")
        lost = answer.result(timeout=ANSWER_SECONDS)
    assert (lost.status_code, lost.json()) == (
        503,
        {"errors": [{"field": None, "message": UNAVAILABLE}]},
    )
