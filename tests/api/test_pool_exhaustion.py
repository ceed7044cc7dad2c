"""A request that finds every connection of its process's pool taken (issue #30, point
6): 503 with Retry-After after TALLY_DATABASE_POOL_TIMEOUT_SECONDS, in each API
version's error shape, never a 500; the notification intake has a connection of its
own and is answered meanwhile. Over real HTTP, on both backends."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import pytest

from support.databases import make_settings, setup_engine
from support.factories import make_source, make_tenant
from support.processes import notify, register_webhook
from support.servers import serve_app
from tally.api.app import create_app
from tally.core.errors import BusyError
from tally.runtime import Runtime, build_runtime

UNAVAILABLE = "Data platform is temporarily unavailable. Please try again later."


def test_a_request_finding_every_connection_taken_is_503_with_retry_after(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    settings = make_settings(
        request, backend, tmp_path / "home", database_pool_size=1, database_pool_timeout_seconds=0.2
    )
    runtime = build_runtime(settings)
    try:
        with setup_engine(settings) as engine:
            tenant = make_tenant(engine, ingestion=True)
            source_id = make_source(engine, tenant, "n\n1\n2\n", name="numbers").id
        with (
            serve_app(create_app(settings, runtime)) as url,
            httpx.Client(base_url=url, timeout=60) as client,
            contextlib.ExitStack() as held,
        ):
            hook = register_webhook(client, tenant, "bank", file_mapping={"url_field": "file_url"})
            # One connection, and the overflow: PostgreSQL one more, SQLite four.
            hold_every_connection(runtime, held, 2 if backend == "postgresql" else 5)

            listed = client.get("/api/v2/transformations", headers=tenant.v2_headers)
            assert (listed.status_code, listed.headers["Retry-After"]) == (503, "1")
            assert listed.json() == {"errors": [{"field": None, "message": UNAVAILABLE}]}
            data = client.get(f"/api/v1/resources/{source_id}/data", headers=tenant.headers)
            assert (data.status_code, data.headers["Retry-After"]) == (503, "1")
            assert data.json() == {"detail": UNAVAILABLE}
            # A preview's key is checked with the API's connections: refused too.
            body = {"name": "p", "inputs": {"s": source_id}, "sql": "SELECT s.n FROM s"}
            shown = client.post(
                "/api/v2/transformations/preview", json=body, headers=tenant.v2_headers
            )
            assert (shown.status_code, shown.headers["Retry-After"]) == (503, "1")
            # The notification intake has a connection of its own.
            notified = notify(client, hook["webhook_id"], "https://bank.example/a.csv")
            assert notified.status_code == 200
    finally:
        runtime.close()


def hold_every_connection(runtime: Runtime, held: contextlib.ExitStack, count: int) -> None:
    """The `count` connections the API's engine may open, checked out into `held`: the
    next asks in vain, which is BusyError, not SQLAlchemy's TimeoutError."""
    for _ in range(count):
        held.enter_context(runtime.engine.connect())
    with pytest.raises(BusyError) as refusal:
        runtime.engine.connect()
    assert refusal.value.retry_after_seconds == 1
