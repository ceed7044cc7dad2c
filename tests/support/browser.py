"""Debian's chromium (/usr/bin/chromium, installed by `scripts/bootstrap --with-chromium`)
driven by Playwright for Python; Playwright's own browser download is never used. And
axe-core (bundled by axe-playwright-python, no network) for accessibility checks."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, sync_playwright

from support.console import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-gpu",
]
BLOCKING_IMPACTS = ("serious", "critical")


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it stands."""
    found = Axe().run(page).response["violations"]
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["html"] for n in v["nodes"]]}
        for v in found
        if v["impact"] in BLOCKING_IMPACTS
    ]


def sign_in_page(page: Page, name: str, password: str = PASSWORD) -> None:
    """Sign in as a person does: the form's labelled fields and its button."""
    page.goto("/console/sign-in")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
