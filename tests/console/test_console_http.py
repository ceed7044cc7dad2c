"""The console over HTTP (tally served by uvicorn on loopback, both backends): where
browsers are sent, the cookie, the headers every page carries, cross-origin POSTs
refused, roles enforced on the server, another workspace's things answered as missing."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from support.console import PASSWORD, SAME_ORIGIN, make_user, sign_in
from support.databases import make_settings
from support.factories import Tenant, make_tenant
from support.servers import serve_app
from tally.api.app import create_app
from tally.console.guard import CONTENT_SECURITY_POLICY
from tally.runtime import Runtime, build_runtime


@pytest.fixture
def browser(api: httpx.Client) -> httpx.Client:
    """The API client, not following redirects (each test reads where it is sent)."""
    api.follow_redirects = False
    return api


def signed_in(client: httpx.Client, runtime: Runtime, tenant: Tenant, role: str) -> int:
    user = make_user(runtime, tenant.workspace_id, role)
    assert sign_in(client, user.name).status_code == 303
    return user.id


@pytest.mark.parametrize("path", ["/", "/console", "/console/", "/console/overview"])
def test_a_signed_out_browser_is_sent_to_sign_in(browser: httpx.Client, path: str) -> None:
    response = browser.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/sign-in"


def test_a_signed_in_browser_is_sent_to_the_overview(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    signed_in(browser, runtime, tenant, "viewer")
    for path in ("/", "/console/", "/console/sign-in"):
        assert browser.get(path).headers["location"] == "/console/overview"
    assert browser.get("/console/overview").status_code == 200


def test_the_session_cookie_is_http_only_and_same_site(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    user = make_user(runtime, tenant.workspace_id, "viewer")
    cookie = sign_in(browser, user.name).headers["set-cookie"]
    assert cookie.startswith("tally_session=")
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie
    assert "Secure" not in cookie  # TALLY_PUBLIC_URL is http: a Secure cookie would be lost
    assert "Max-Age" not in cookie  # the server decides when a session ends


def test_over_https_the_cookie_is_secure_and_host_only(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    settings = make_settings(
        request, backend, tmp_path / "home", public_url="https://tally.example"
    )
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        user = make_user(runtime, tenant.workspace_id, "viewer")
        with serve_app(create_app(settings, runtime)) as url, httpx.Client(base_url=url) as client:
            cookie = sign_in(client, user.name).headers["set-cookie"]
    finally:
        runtime.close()
    assert cookie.startswith("__Host-tally_session=")
    assert "Secure" in cookie
    assert "Path=/" in cookie


def test_sign_out_ends_the_session_on_the_server(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    signed_in(browser, runtime, tenant, "viewer")
    kept = browser.cookies["tally_session"]
    out = browser.post("/console/sign-out", headers=SAME_ORIGIN)
    assert out.status_code == 303
    assert out.headers["location"] == "/console/sign-in"
    browser.cookies.set("tally_session", kept)  # a copy of the cookie, kept by an attacker
    replayed = browser.get("/console/overview")
    assert replayed.headers["location"] == "/console/sign-in"


def test_wrong_password_and_unknown_user_get_the_same_page(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    user = make_user(runtime, tenant.workspace_id, "viewer")
    wrong = sign_in(browser, user.name, "not the password")
    unknown = sign_in(browser, "nobody-at-all", PASSWORD)
    assert wrong.status_code == unknown.status_code == 401
    assert "Wrong username or password." in wrong.text
    assert wrong.text.replace(user.name, "X") == unknown.text.replace("nobody-at-all", "X")
    assert "set-cookie" not in wrong.headers


@pytest.mark.parametrize(
    "path", ["/console/sign-in", "/console/overview", "/console/no-such-page", "/console/users"]
)
def test_every_console_page_sends_the_security_headers(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, path: str
) -> None:
    if path != "/console/sign-in":
        signed_in(browser, runtime, tenant, "viewer")  # /console/users: a viewer's 403
    response = browser.get(path)
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert csp == CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in csp
    assert "script-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
    assert response.headers["cache-control"] == "no-store"
    assert "<script" not in response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "same-site", "Origin": "http://other.127.0.0.1.nip.io"},
        {"Origin": "https://evil.example"},  # a browser without Fetch Metadata
        {"Origin": "null"},  # a sandboxed frame, a data: URL
        {},  # neither header: not a browser on our page
    ],
    ids=["cross-site", "same-site", "foreign-origin", "null-origin", "no-header"],
)
def test_a_cross_origin_post_is_refused_before_it_does_anything(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, headers: dict[str, str]
) -> None:
    signed_in(browser, runtime, tenant, "admin")
    victim = make_user(runtime, tenant.workspace_id, "viewer")
    for path in ("/console/sign-out", f"/console/users/{victim.id}/disable", "/console/sign-in"):
        refused = browser.post(path, headers=headers, data={"username": "x", "password": "y"})
        assert refused.status_code == 403, path
        assert "came from another site" in refused.text
        assert refused.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert browser.get("/console/overview").status_code == 200  # still signed in
    assert not runtime.users.get_user(victim.id).disabled


def test_a_post_whose_origin_is_the_consoles_own_is_accepted(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    signed_in(browser, runtime, tenant, "viewer")
    own = str(browser.base_url).rstrip("/")
    assert browser.post("/console/sign-out", headers={"Origin": own}).status_code == 303


@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_a_forged_admin_post_of_a_lesser_role_is_403(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, role: str
) -> None:
    signed_in(browser, runtime, tenant, role)
    victim = make_user(runtime, tenant.workspace_id, "admin")
    for action in ("disable", "reset"):
        forged = browser.post(f"/console/users/{victim.id}/{action}", headers=SAME_ORIGIN)
        assert forged.status_code == 403
        assert "Not allowed" in forged.text
    assert browser.get("/console/users").status_code == 403
    after = runtime.users.get_user(victim.id)
    assert not after.disabled
    assert after.has_password


def test_an_admin_disables_and_reinvites_users_of_their_workspace(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    signed_in(browser, runtime, tenant, "admin")
    other = make_user(runtime, tenant.workspace_id, "viewer")
    reset = browser.post(f"/console/users/{other.id}/reset", headers=SAME_ORIGIN)
    assert reset.status_code == 200
    assert re.search(r"/console/invite/inv_[\w-]{43}", reset.text)
    disabled = browser.post(f"/console/users/{other.id}/disable", headers=SAME_ORIGIN)
    assert disabled.status_code == 200
    assert runtime.users.get_user(other.id).disabled


def test_another_workspaces_user_answers_as_a_missing_one(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    signed_in(browser, runtime, tenant, "admin")
    stranger = make_user(runtime, make_tenant(runtime.engine).workspace_id, "viewer")
    theirs = browser.post(f"/console/users/{stranger.id}/disable", headers=SAME_ORIGIN)
    missing = browser.post("/console/users/999999/disable", headers=SAME_ORIGIN)
    not_a_number = browser.post("/console/users/abc/disable", headers=SAME_ORIGIN)
    assert theirs.status_code == missing.status_code == not_a_number.status_code == 404
    assert theirs.text == missing.text == not_a_number.text
    assert not runtime.users.get_user(stranger.id).disabled


def test_the_api_keeps_its_own_404(browser: httpx.Client) -> None:
    response = browser.get("/api/v1/nowhere")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}
    assert "content-security-policy" not in response.headers


@pytest.mark.parametrize("action", ["disable", "reset"])
def test_an_admin_cannot_disable_or_reset_themselves(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant, action: str
) -> None:
    me = signed_in(browser, runtime, tenant, "admin")
    refused = browser.post(f"/console/users/{me}/{action}", headers=SAME_ORIGIN)
    assert refused.status_code == 400
    assert "yourself" in refused.text
    assert browser.get("/console/overview").status_code == 200  # still signed in
    assert not runtime.users.get_user(me).disabled


def test_a_used_invite_posted_again_is_refused(
    browser: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    issued = runtime.users.create_user(workspace_id=tenant.workspace_id, name="once", role="viewer")
    form = {"password": PASSWORD, "confirmation": PASSWORD}
    url = f"/console/invite/{issued.token}"
    first = browser.post(url, data=form, headers=SAME_ORIGIN)
    assert first.headers["location"] == "/console/sign-in?password_set=true"
    again = browser.post(url, data={**form, "password": "x" * 20}, headers=SAME_ORIGIN)
    assert again.status_code == 404
    assert "Invite not valid" in again.text
    assert browser.get("/console/invite/not-a-token").status_code == 404
