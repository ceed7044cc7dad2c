"""TALLY_HOME is private (issue #14, point 4b), on both backends: the folder is 0700 and
every file tally writes in it is 0600 (the SQLite database and its WAL and SHM files,
uploaded and downloaded files, the generated secret key), as the secret key already was.

The files are made for real: a source fed by an upload and one by a webhook download
from a loopback file server, through the real pipeline; then every entry under the
folder is checked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.factories import Tenant, run_pipeline
from support.servers import file_server_app, serve_app
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings

CSV = b"id,amount\n1,10.50\n2,-3.25\n"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common default: files 0644 and folders 0755 unless tally asks otherwise."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    """A home tally creates itself (on SQLite, with a database created from nothing)."""
    home = tmp_path / "home"
    if backend == "sqlite":
        return Settings(
            home=home, log_level="WARNING", query_processes=0, fetch_allow="127.0.0.0/8"
        )
    return make_settings(request, backend, home, fetch_allow="127.0.0.0/8")


def modes_under(home: Path) -> dict[str, int]:
    """Every entry under `home` (itself included): its permission bits, by relative path."""
    found = {".": stat.S_IMODE(home.stat().st_mode)}
    for path in home.rglob("*"):
        found[str(path.relative_to(home))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def loose(modes: dict[str, int], home: Path) -> dict[str, str]:
    """The entries that are not private, with their modes."""
    return {
        name: oct(mode)
        for name, mode in modes.items()
        if mode != (PRIVATE_DIR if (home / name).is_dir() else PRIVATE_FILE)
    }


def test_home_and_every_file_tally_writes_there_are_private(
    api: httpx.Client, runtime: Runtime, ingestion_tenant: Tenant, settings: Settings, backend: str
) -> None:
    created = api.post(
        "/api/v2/sources", json={"name": "uploads"}, headers=ingestion_tenant.v2_headers
    )
    assert created.status_code == 201, created.text
    uploaded = api.post(
        f"/api/v2/sources/{created.json()['id']}/feed-source",
        content=CSV,
        headers={**ingestion_tenant.v2_headers, "content-type": "text/csv"},
    )
    assert uploaded.status_code == 202, uploaded.text
    with serve_app(file_server_app({"a.csv": CSV + b"3,1.00\n"})) as files_url:
        hook = api.post(
            "/api/v2/webhooks",
            json={"name": "bank", "webhook": {}},
            headers=ingestion_tenant.v2_headers,
        )
        assert hook.status_code == 201, hook.text
        notified = api.post(
            f"/api/v2/webhooks/{hook.json()['webhook_id']}/feed-source",
            json={"file_url": f"{files_url}/files/a.csv"},
        )
        assert notified.status_code == 200, notified.text
        run_pipeline(runtime)
    statuses = [
        status_of(api, ingestion_tenant, s, f)
        for s, f in files_of(api, ingestion_tenant, created, hook)
    ]
    assert statuses == ["delivered", "delivered"]
    home = settings.home
    modes = modes_under(home)
    expected = {"secret.key"} | (
        {"tally.db", "tally.db-wal", "tally.db-shm"} if backend == "sqlite" else set()
    )
    assert expected <= set(modes)
    assert sum(1 for name in modes if name.endswith(".data")) >= 1  # a kept file
    assert loose(modes, home) == {}


def files_of(
    api: httpx.Client, tenant: Tenant, *created: httpx.Response
) -> Iterator[tuple[int, int]]:
    for response in created:
        source_id = response.json()["id"]
        listed = api.get(f"/api/v2/sources/{source_id}/files", headers=tenant.v2_headers)
        assert listed.status_code == 200, listed.text
        for file in listed.json()["data"]:
            yield source_id, file["id"]


def status_of(api: httpx.Client, tenant: Tenant, source_id: int, file_id: int) -> Any:
    url = f"/api/v2/sources/{source_id}/files/{file_id}"
    return api.get(url, headers=tenant.v2_headers).json()["status"]


def test_an_existing_home_is_made_private_at_start(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """A home made by an earlier version (0755, a 0644 database) is closed at start: the
    folder is what keeps other users out of every file below it."""
    home = tmp_path / "home"
    settings = make_settings(request, backend, home)  # SQLite: a copy of a migrated file
    home.mkdir(exist_ok=True)
    home.chmod(0o755)
    if backend == "sqlite":
        (home / "tally.db").chmod(0o644)
        (home / "tally.db-wal").write_bytes(b"")  # an empty log: SQLite starts a new one
        (home / "tally.db-wal").chmod(0o644)
    runtime = build_runtime(settings)
    try:
        modes = modes_under(home)
        assert modes["."] == PRIVATE_DIR
        if backend == "sqlite":
            assert modes["tally.db"] == PRIVATE_FILE
            assert modes["tally.db-wal"] == PRIVATE_FILE
    finally:
        runtime.close()
