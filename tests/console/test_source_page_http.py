"""The source page over HTTP (tally served by uvicorn on loopback, both backends): files
newest first, paged and filtered in the URL; one file's page; upload (admins only, the
sender recorded); the webhook rotated; a status callback retried now against a real
receiver; another workspace's source answered as a missing one; hostile text escaped."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import httpx
import pytest

from support.console import SAME_ORIGIN, add_file, make_user, sign_in
from support.databases import make_settings
from support.factories import Tenant, make_source, make_tenant
from support.source_page import deliveries_of, running_receiver, webhook_source
from support.waiting import eventually
from tally.console.source import FILES_PAGE_SIZE
from tally.core.files import FileStatus
from tally.core.status_callbacks import DeliveryState
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage import files
from tally.storage.engine import write_connection

MAX_FILE_BYTES = 4096
CSV = b"city,population\nOslo,709037\nBergen,291940\n"
TOO_LARGE = f"The file is larger than the limit of {MAX_FILE_BYTES} bytes."
HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        max_file_bytes=MAX_FILE_BYTES,
        fetch_allow="127.0.0.0/8",  # the status callbacks' receiver is on loopback
        callback_retry_schedule="0.05",
        retry_base_seconds=0.01,  # a file's download is tried again at once, twice in all
        retry_max_seconds=0.02,
        delivery_max_attempts=2,
    )


@pytest.fixture
def browser(api: httpx.Client) -> httpx.Client:
    api.follow_redirects = False
    return api


def signed_in(client: httpx.Client, runtime: Runtime, tenant: Tenant, role: str) -> str:
    user = make_user(runtime, tenant.workspace_id, role)
    assert sign_in(client, user.name).status_code == 303
    return user.name


def page_of(source_id: int, query: str = "") -> str:
    return f"/console/sources/{source_id}{query}"


def file_links(html: str) -> list[int]:
    return [int(found) for found in re.findall(r">File (\d+)</a></th>", html)]


def upload(
    client: httpx.Client, source_id: int, name: str, body: bytes, **headers: str
) -> httpx.Response:
    return client.post(
        f"/console/sources/{source_id}/upload",
        files={"file": (name, body, "text/csv")},
        headers={**SAME_ORIGIN, **headers},
    )


def test_files_newest_first_paged_and_filtered_in_the_url(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "a,b\n1,2\n")
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    ids = [
        add_file(
            runtime.engine,
            source.id,
            at=start + dt.timedelta(minutes=n),
            status=FileStatus.FAILED if n % 10 == 0 else FileStatus.DELIVERED,
            name=f"day-{n}.csv",
        )
        for n in range(FILES_PAGE_SIZE + 5)
    ]
    signed_in(browser, runtime, tenant, "viewer")
    first = browser.get(page_of(source.id))
    assert first.status_code == 200
    assert file_links(first.text) == ids[::-1][:FILES_PAGE_SIZE]
    older = re.search(r'href="([^"]+)#files">Older files', first.text)
    assert older is not None
    second = browser.get(older.group(1).replace("&amp;", "&"))
    assert file_links(second.text) == ids[::-1][FILES_PAGE_SIZE:]
    assert "Older files" not in second.text
    assert "Newest files" in second.text
    failed = browser.get(page_of(source.id, "?status=failed"))
    assert file_links(failed.text) == [i for n, i in enumerate(ids) if n % 10 == 0][::-1]
    assert "line 2, column amount: &#39;ten&#39; is not a decimal" in failed.text  # in full
    assert f'href="/console/resources/{source.id}">Rows</a>' in first.text


def test_a_files_page_shows_its_attempts_and_who_took_it_back(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "a,b\n1,2\n")
    at = dt.datetime(2026, 11, 2, tzinfo=dt.UTC)
    file_id = add_file(runtime.engine, source.id, at=at, status=FileStatus.DELIVERED, name="x.csv")
    with write_connection(runtime.engine) as conn, conn.begin():
        files.retract(conn, file_id, now=at + dt.timedelta(hours=1), by="api key sha256:ab12")
    signed_in(browser, runtime, tenant, "viewer")
    listed = browser.get(page_of(source.id)).text
    assert "retracted" in listed
    assert "by api key sha256:ab12" in listed
    detail = browser.get(f"/console/sources/{source.id}/files/{file_id}")
    assert detail.status_code == 200
    assert "Attempts</dt><dd>0 (download and load" in detail.text
    assert "Taken back</dt><dd>by api key sha256:ab12, <time" in detail.text


def test_another_workspaces_source_and_a_missing_one_are_the_same_404_page(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    other = make_tenant(runtime.engine)
    theirs = make_source(runtime.engine, other, "a\n1\n")
    their_file = add_file(
        runtime.engine, theirs.id, at=dt.datetime.now(dt.UTC), status=FileStatus.DELIVERED, name="t"
    )
    signed_in(browser, runtime, tenant, "admin")
    missing = browser.get(page_of(999_999))
    assert missing.status_code == 404
    for path in (
        page_of(theirs.id),
        f"/console/sources/{theirs.id}/files/{their_file}",
        f"/console/sources/{theirs.id}/files/{their_file}/status",
    ):
        response = browser.get(path)
        assert response.status_code == 404
        assert "theirs" not in response.text
        assert "a\n1" not in response.text
    assert browser.get(page_of(theirs.id)).text == missing.text
    refused = upload(browser, theirs.id, "x.csv", CSV)
    assert refused.status_code == 404
    assert (
        browser.post(
            f"/console/sources/{theirs.id}/webhook/rotate", headers=SAME_ORIGIN
        ).status_code
        == 404
    )


def test_hostile_file_names_and_errors_are_text(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "a\n1\n")
    file_id = add_file(
        runtime.engine,
        source.id,
        at=dt.datetime.now(dt.UTC),
        status=FileStatus.DELIVERED,
        name=HOSTILE,
    )
    with write_connection(runtime.engine) as conn, conn.begin():
        files.finish(
            conn, file_id, status=FileStatus.FAILED, now=dt.datetime.now(dt.UTC), error=HOSTILE
        )
    signed_in(browser, runtime, tenant, "admin")
    for path in (page_of(source.id), f"/console/sources/{source.id}/files/{file_id}"):
        html = browser.get(path).text
        assert "<img src=x" not in html
        assert "<script>alert" not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_an_admins_upload_is_queued_with_their_name_and_its_status_is_polled(
    browser: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = make_source(runtime.engine, ingestion_tenant, "city,population\nRome,1\n")
    name = signed_in(browser, runtime, ingestion_tenant, "admin")
    plain = upload(browser, source.id, "cities.csv", CSV)
    assert plain.status_code == 303
    file_url = plain.headers["location"]
    assert re.fullmatch(rf"/console/sources/{source.id}/files/\d+", file_url)
    page = browser.get(file_url).text
    assert "cities.csv" in page
    assert f"sent by {name}" in page
    assert "queued" in page
    more = CSV + b"Trondheim,212660\n"
    scripted = upload(browser, source.id, "more.csv", more, Accept="application/json")
    assert scripted.status_code == 202
    body = scripted.json()
    assert body["status"] == "queued"
    assert body["final"] is False
    runtime.delivery.process_file(runtime.delivery.claim_file(worker="w"), worker="w")
    runtime.delivery.process_file(runtime.delivery.claim_file(worker="w"), worker="w")
    polled = browser.get(body["status_url"]).json()
    assert polled == {**body, "status": "delivered", "final": True, "rows": 3}
    latin = upload(
        browser,
        source.id,
        "latin.csv",
        b"city,population\nS\xe3o Paulo,1\n",
        Accept="application/json",
    )
    runtime.delivery.process_file(runtime.delivery.claim_file(worker="w"), worker="w")
    refused = browser.get(latin.json()["status_url"]).json()
    assert (refused["status"], refused["final"]) == ("failed", True)
    assert "the file is not valid UTF-8" in refused["error"]
    through_api = httpx.get(
        f"{browser.base_url}/api/v2/sources/{source.id}/files/{body['id']}",
        headers=ingestion_tenant.v2_headers,
    ).json()
    assert through_api["uploaded_by"] == name


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"", 400, "The file is empty: a header line is required."),
        # Past the limit while staged; and past it in the declared length, refused unread.
        (b"a\n" + b"1\n" * MAX_FILE_BYTES, 413, TOO_LARGE),
        (b"a\n" + b"1\n" * 40_000, 413, TOO_LARGE),
    ],
)
def test_a_refused_upload_says_why_beside_the_field(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, body: bytes, status: int, message: str
) -> None:
    source = make_source(runtime.engine, tenant, "a\n1\n")
    signed_in(browser, runtime, tenant, "admin")
    page = upload(browser, source.id, "x.csv", body)
    assert page.status_code == status
    assert f'<p class="error" role="alert" id="upload-error">{message}</p>' in page.text
    scripted = upload(browser, source.id, "x.csv", body, Accept="application/json")
    assert (scripted.status_code, scripted.json()) == (status, {"error": message})
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source.id) == 0


@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_only_an_admin_may_upload_rotate_or_retry(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, role: str
) -> None:
    source = make_source(runtime.engine, tenant, "a\n1\n")
    signed_in(browser, runtime, tenant, role)
    page = browser.get(page_of(source.id)).text
    assert "Upload a file" not in page
    assert "upload.js" not in page
    assert upload(browser, source.id, "x.csv", CSV).status_code == 403
    for action in ("webhook/rotate", "deliveries/1/retry"):
        assert (
            browser.post(f"{page_of(source.id)}/{action}", headers=SAME_ORIGIN).status_code == 403
        )
    with runtime.engine.connect() as conn:
        assert files.count_files(conn, source.id) == 0


def test_rotation_shows_the_new_id_once_and_the_old_one_stops_working(
    browser: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    hooked = webhook_source(
        runtime, ingestion_tenant.workspace_id, "orders", "http://127.0.0.1:9/h"
    )
    signed_in(browser, runtime, ingestion_tenant, "admin")
    page = browser.get(page_of(hooked.id)).text
    assert "POST /api/v2/webhooks/whk_…/feed-source" in page
    assert hooked.webhook_id not in page
    rotated = browser.post(f"{page_of(hooked.id)}/webhook/rotate", headers=SAME_ORIGIN)
    assert rotated.status_code == 200
    found = re.search(r'<code id="new-webhook-id">(whk_[^<]+)</code>', rotated.text)
    assert found is not None
    new_id = found.group(1)
    assert new_id not in browser.get(page_of(hooked.id)).text
    notification = {"file_url": "http://127.0.0.1:9/x.csv", "filename": "x.csv"}
    old = browser.post(f"/api/v2/webhooks/{hooked.webhook_id}/feed-source", json=notification)
    new = browser.post(f"/api/v2/webhooks/{new_id}/feed-source", json=notification)
    assert (old.status_code, new.status_code) == (404, 200)
    uploads_only = make_source(runtime.engine, ingestion_tenant, "a\n1\n")
    assert "Rotate webhook id" not in browser.get(page_of(uploads_only.id)).text
    no_webhook = browser.post(f"{page_of(uploads_only.id)}/webhook/rotate", headers=SAME_ORIGIN)
    assert no_webhook.status_code == 404


def test_retry_now_makes_a_failed_delivery_due_and_the_sender_delivers_it(
    browser: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    workspace_id = ingestion_tenant.workspace_id
    with running_receiver() as (receiver, hook_url):
        hooked = webhook_source(runtime, workspace_id, "payouts", hook_url)
        notified = browser.post(
            f"/api/v2/webhooks/{hooked.webhook_id}/feed-source",
            json={"file_url": "http://127.0.0.1:9/p.csv", "filename": "p.csv"},
        )
        assert notified.status_code == 200

        def settled(state: DeliveryState) -> bool:
            runtime.callbacks.fan_out()
            runtime.callbacks.send_one(worker="w")
            found = deliveries_of(runtime, workspace_id, hooked.id)
            return bool(found) and found[0].state is state

        eventually(lambda: settled(DeliveryState.FAILED), timeout=20, what="the delivery to fail")
        signed_in(browser, runtime, ingestion_tenant, "admin")
        page = browser.get(page_of(hooked.id)).text
        (failed,) = deliveries_of(runtime, workspace_id, hooked.id)
        assert (failed.attempts, failed.last_status_code) == (2, 500)
        assert "file.accepted" in page
        assert f"Retry delivery {failed.id} now" in page
        receiver.refusing = False
        retried = browser.post(
            f"{page_of(hooked.id)}/deliveries/{failed.id}/retry", headers=SAME_ORIGIN
        )
        assert retried.status_code == 303
        assert retried.headers["location"] == f"{page_of(hooked.id)}?retried={failed.id}#deliveries"
        assert deliveries_of(runtime, workspace_id, hooked.id)[0].state is DeliveryState.PENDING
        eventually(lambda: settled(DeliveryState.DELIVERED), timeout=20, what="the delivery")
        assert receiver.calls == 3
        again = browser.post(
            f"{page_of(hooked.id)}/deliveries/{failed.id}/retry", headers=SAME_ORIGIN
        )
        assert again.status_code == 409
        assert "it was delivered" in again.text


def test_a_files_page_lists_each_attempt_that_did_not_deliver_it(
    browser: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    hooked = webhook_source(
        runtime, ingestion_tenant.workspace_id, "refused", "http://127.0.0.1:9/h"
    )
    notified = browser.post(
        f"/api/v2/webhooks/{hooked.webhook_id}/feed-source",
        json={"file_url": "http://127.0.0.1:9/gone.csv", "filename": "gone.csv"},
    )
    file_id = int(notified.headers["X-Tally-File-Id"])

    def attempted() -> bool:
        claimed = runtime.delivery.claim_file(worker="w")
        if claimed is not None:
            runtime.delivery.process_file(claimed, worker="w")
        record = runtime.files.get_source_file(
            workspace_id=ingestion_tenant.workspace_id, source_id=hooked.id, file_id=file_id
        )
        return record.status is FileStatus.FAILED

    eventually(attempted, timeout=20, what="the file to fail after its two attempts")
    signed_in(browser, runtime, ingestion_tenant, "viewer")
    page = browser.get(f"/console/sources/{hooked.id}/files/{file_id}").text
    rows = re.findall(r'<th scope="row" class="num">(\d)</th>.*?<td>(.*?)</td>\s*</tr>', page, re.S)
    assert [number for number, _ in rows] == ["1", "2"]
    assert "none: the file failed" in rows[1][1]
    assert page.count("could not connect to http://127.0.0.1:9/gone.csv") == 3  # and the file's
    through_api = httpx.get(
        f"{browser.base_url}/api/v2/sources/{hooked.id}/files/{file_id}/attempts",
        headers=ingestion_tenant.v2_headers,
    ).json()["data"]
    assert [a["attempt_number"] for a in through_api] == [1, 2]
    assert through_api[0]["next_attempt_at"] is not None
    assert through_api[1]["next_attempt_at"] is None
