"""/api/v1/docs works offline (issue #30, point 9): Swagger UI's script, style sheet and
icon come from tally itself, and the page names no other host."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from support.databases import make_settings
from support.servers import LOOPBACK, serve_app
from tally.api.app import create_app
from tally.runtime import build_runtime

DOCS = "/api/v1/docs"


@pytest.fixture(scope="module")
def docs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, str]]:
    """A client of a loopback server, and the docs page it served."""
    settings = make_settings(request, "sqlite", tmp_path_factory.mktemp("docs"))
    runtime = build_runtime(settings)
    try:
        with serve_app(create_app(settings, runtime)) as url, httpx.Client(base_url=url) as api:
            page = api.get(DOCS)
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            yield api, page.text
    finally:
        runtime.close()


def referenced(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)


def test_the_page_names_no_other_host(docs: tuple[httpx.Client, str]) -> None:
    _, html = docs
    absolute = re.findall(r"""(?:https?:)?//[^\s"'<>)]+""", html)
    assert [u for u in absolute if urlsplit(u).hostname not in (LOOPBACK, "localhost")] == []
    assert '"validatorUrl": null' in html  # no spec sent to an online validator


def test_every_asset_the_page_loads_comes_from_the_same_server(
    docs: tuple[httpx.Client, str],
) -> None:
    api, html = docs
    assets = referenced(html)
    assert {Path(urlsplit(a).path).suffix for a in assets} >= {".js", ".css"}
    types = {}
    for asset in assets:
        assert not urlsplit(asset).netloc, asset  # asked of this server only, never another
        answer = api.get(urljoin(f"{api.base_url}{DOCS}", asset))
        assert answer.status_code == 200, asset
        assert answer.content, asset
        types[Path(asset).suffix] = answer.headers["content-type"]
        if asset.endswith(".css"):  # nothing the style sheet loads in turn from elsewhere
            assert re.findall(r"(?:@import|url\()\s*['\"]?(?:https?:)?//", answer.text) == []
    assert types[".js"].startswith("text/javascript")
    assert types[".css"].startswith("text/css")
    assert "SwaggerUIBundle" in api.get(next(a for a in assets if a.endswith(".js"))).text
