"""The console's browser tests' fixtures: one `tally serve` (with its worker) per backend
for each test module, one chromium for the module, and per test a fresh browser context
(no cookie shared between tests) whose pages must never open a dialog (a script ran)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, Page

from support.browser import chromium
from support.console import SIGN_IN_MAX_FAILURES, Site
from support.databases import BACKENDS, make_settings
from support.factories import Tenant, make_tenant
from support.processes import process_defaults, running_processes
from tally.runtime import build_runtime


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module", params=BACKENDS)
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("console")
    settings = make_settings(
        request,
        str(request.param),
        root / "home",
        **process_defaults(sign_in_max_failures=SIGN_IN_MAX_FAILURES, serve_worker=True),
    )
    runtime = build_runtime(settings)
    try:
        with running_processes(root / "logs") as processes:
            server = processes.serve(settings)
            server.wait_ready()
            yield Site(server.url, runtime)
    finally:
        runtime.close()


@pytest.fixture
def tenant(site: Site) -> Tenant:
    return make_tenant(site.runtime.engine)


@pytest.fixture
def context(browser: Browser, site: Site) -> Iterator[BrowserContext]:
    opened = browser.new_context(base_url=site.url)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def dialogs(context: BrowserContext) -> list[str]:
    """Every alert/confirm/prompt any page of the test opened: a script that ran."""
    opened: list[str] = []

    def seen(dialog: Dialog) -> None:
        opened.append(dialog.message)
        dialog.dismiss()

    context.on("dialog", seen)
    return opened


@pytest.fixture
def page(context: BrowserContext, dialogs: list[str]) -> Iterator[Page]:
    opened = context.new_page()
    yield opened
    assert dialogs == [], "a page ran a script"
