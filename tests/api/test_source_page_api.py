"""The API beside the console's source page (issue #33), for integrations, on both
backends: a source's webhook given a new id (the old one refused, the new one delivers),
its status-callback deliveries listed newest first and retried now against a real
receiver on loopback, another workspace's source answered as a missing one."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from support.databases import make_settings
from support.factories import Tenant, make_tenant
from support.servers import serve_app
from support.source_page import running_receiver, webhook_source
from support.waiting import eventually
from tally.runtime import Runtime
from tally.settings import Settings

CSV = b"city,population\nOslo,709037\n"


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    # The receiver and the file server are on loopback; one retry, soon.
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        fetch_allow="127.0.0.0/8",
        callback_retry_schedule="0.05",
    )


def notify(api: httpx.Client, webhook_id: str, file_url: str) -> httpx.Response:
    return api.post(
        f"/api/v2/webhooks/{webhook_id}/feed-source",
        json={"file_url": file_url, "filename": "cities.csv"},
    )


def test_a_rotated_webhook_refuses_its_old_id_and_delivers_with_the_new_one(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    async def cities(_request: Request) -> Response:
        return Response(CSV, media_type="text/csv")

    hooked = webhook_source(
        runtime, ingestion_tenant.workspace_id, "cities", "http://127.0.0.1:9/h"
    )
    rotate = f"/api/v2/sources/{hooked.id}/webhook/rotate"
    with serve_app(Starlette(routes=[Route("/cities.csv", cities)])) as files_url:
        answer = api.post(rotate, headers=ingestion_tenant.v2_headers)
        assert answer.status_code == 200
        new_id = answer.json()["webhook_id"]
        assert answer.json() == {"id": hooked.id, "webhook_id": new_id}
        assert new_id.startswith("whk_")
        assert new_id != hooked.webhook_id
        assert notify(api, hooked.webhook_id, f"{files_url}/cities.csv").status_code == 404
        accepted = notify(api, new_id, f"{files_url}/cities.csv")
        assert accepted.status_code == 200
        file_id = int(accepted.headers["X-Tally-File-Id"])
        runtime.delivery.process_file(runtime.delivery.claim_file(worker="w"), worker="w")
    record = api.get(
        f"/api/v2/sources/{hooked.id}/files/{file_id}", headers=ingestion_tenant.v2_headers
    ).json()
    assert (record["status"], record["rows"], record["uploaded_by"]) == ("delivered", 1, None)
    other = make_tenant(runtime.engine, ingestion=True)
    assert api.post(rotate, headers=other.v2_headers).status_code == 404


def test_deliveries_are_listed_and_retried_now(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    headers = ingestion_tenant.v2_headers
    with running_receiver() as (receiver, hook_url):
        hooked = webhook_source(runtime, ingestion_tenant.workspace_id, "payouts", hook_url)
        listing = f"/api/v2/sources/{hooked.id}/callback-deliveries"
        for n in range(3):
            assert notify(api, hooked.webhook_id, f"http://127.0.0.1:9/{n}.csv").status_code == 200

        def states() -> list[str]:
            runtime.callbacks.fan_out()
            runtime.callbacks.send_one(worker="w")
            return [d["state"] for d in api.get(listing, headers=headers).json()["data"]]

        eventually(lambda: states() == ["failed"] * 3, timeout=20, what="three failed deliveries")
        first = api.get(listing, headers=headers, params={"limit": 2}).json()
        ids = [d["id"] for d in first["data"]]
        assert ids == sorted(ids, reverse=True)
        rest = api.get(listing, headers=headers, params={"before": first["next_before"]}).json()
        assert rest["next_before"] is None
        (oldest,) = rest["data"]
        assert oldest["id"] < ids[-1]
        assert (oldest["event"], oldest["attempts"], oldest["last_status_code"]) == (
            "file.accepted",
            2,
            500,
        )
        assert oldest["url"] == hook_url
        receiver.refusing = False
        retry = f"{listing}/{oldest['id']}/retry"
        retried = api.post(retry, headers=headers)
        assert retried.status_code == 200
        assert retried.json()["state"] == "pending"
        assert retried.json()["next_attempt_at"] is not None
        eventually(
            lambda: states().count("delivered") == 1, timeout=20, what="the retried delivery"
        )
        delivered = api.post(retry, headers=headers)
        assert delivered.status_code == 409
        assert "it was delivered" in delivered.json()["errors"][0]["message"]
    other = make_tenant(runtime.engine, ingestion=True)
    assert api.get(listing, headers=other.v2_headers).status_code == 404
    assert api.post(retry, headers=other.v2_headers).status_code == 404
