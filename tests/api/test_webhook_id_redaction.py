"""The webhook id is a credential (spec part 2): no log line and no error report carries it
(issue #14, point 4a), on both backends.

A real uvicorn server on loopback, with its access log on, serves tally; every record
of tally's and uvicorn's loggers is captured as a handler would write it (tracebacks
included). A crash is provoked for real: the files table is renamed away, so accepting
a notification fails inside the database.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from support.factories import Tenant
from support.servers import serve_app
from tally.api.app import create_app
from tally.runtime import Runtime

LOGGERS = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "tally")
# The test's own HTTP client logs each request it sends (tally's downloads and callbacks
# use no httpx.Client, so nothing of tally's is left out).
CLIENT_LOGGERS = ("httpx", "httpcore")


class Captured(logging.Handler):
    """Every record, formatted in full (message and traceback)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.partition(".")[0] not in CLIENT_LOGGERS:
            self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def served(runtime: Runtime) -> Iterator[tuple[httpx.Client, Captured]]:
    """tally with uvicorn's access log on, and the records of every logger that matters
    (attached once uvicorn has configured its own)."""
    captured = Captured()
    with (
        serve_app(create_app(runtime.settings, runtime), access_log=True) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        loggers = [logging.getLogger(name) for name in LOGGERS]
        levels = [logger.level for logger in loggers]
        for logger in loggers:
            logger.addHandler(captured)
            logger.setLevel(logging.INFO)
        try:
            yield client, captured
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.removeHandler(captured)
                logger.setLevel(level)


def register(client: httpx.Client, tenant: Tenant) -> dict[str, Any]:
    headers = {
        "x-api-key": tenant.key,
        "x-svc-workspace": str(tenant.workspace_id),
        "x-svc-account": str(tenant.account_id),
    }
    response = client.post("/api/v2/webhooks", headers=headers, json={"name": "b", "webhook": {}})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def secret_part(webhook_id: str) -> str:
    return webhook_id.removeprefix("whk_")


def test_a_crash_on_feed_source_logs_no_webhook_id(
    served: tuple[httpx.Client, Captured], runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    client, captured = served
    webhook_id = register(client, ingestion_tenant)["webhook_id"]
    with runtime.engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE files RENAME TO files_gone"))
    response = client.post(
        f"/api/v2/webhooks/{webhook_id}/feed-source", json={"file_url": "https://x.test/a.csv"}
    )
    assert response.status_code == 500
    assert secret_part(webhook_id) not in response.text
    assert "request_crashed" in captured.text  # the crash was logged, with its traceback
    assert "Traceback" in captured.text
    assert "/api/v2/webhooks/" in captured.text  # the route is still named
    assert secret_part(webhook_id) not in captured.text


@pytest.mark.parametrize("known", [True, False], ids=["known id", "guessed id"])
def test_the_access_log_names_the_route_without_the_webhook_id(
    served: tuple[httpx.Client, Captured], ingestion_tenant: Tenant, known: bool
) -> None:
    client, captured = served
    webhook_id = register(client, ingestion_tenant)["webhook_id"] if known else "whk_" + "A" * 43
    response = client.post(
        f"/api/v2/webhooks/{webhook_id}/feed-source?x=1", json={"file_url": "https://x.test/a"}
    )
    assert response.status_code == (200 if known else 404)
    access = [line for line in captured.lines if line.startswith("uvicorn.access")]
    assert any("/feed-source" in line for line in access), captured.text
    assert secret_part(webhook_id) not in captured.text
