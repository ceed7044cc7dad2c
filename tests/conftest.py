"""Fixtures shared by every test level: both backends, real servers, fresh databases.

Each test that takes `runtime` runs twice, on SQLite and on PostgreSQL (a throwaway
server started once per session from the installed binaries). Each test gets its own
database, copied from a template migrated once. TALLY_TEST_BACKENDS=sqlite narrows
a local run; CI runs both.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.pg import PostgresServer, create_database, start_postgres
from support.servers import serve_app
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings
from tally.storage.engine import create_database_engine
from tally.storage.migrate import upgrade_database

BACKENDS = [b for b in os.environ.get("TALLY_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]
_database_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> str:
    url = create_database(postgres_server, "tally_template")
    engine = create_database_engine(url)
    upgrade_database(engine)
    engine.dispose()
    return "tally_template"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "tally.db"
    engine = create_database_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    engine.dispose()
    return path


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_settings(
    request: pytest.FixtureRequest, backend: str, home: Path, **overrides: object
) -> Settings:
    """Settings on a fresh database of the given backend."""
    url = None
    if backend == "postgresql":
        server = request.getfixturevalue("postgres_server")
        template = request.getfixturevalue("postgres_template")
        url = create_database(server, f"t{os.getpid()}_{next(_database_numbers)}", template)
    else:
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy(request.getfixturevalue("sqlite_template"), home / "tally.db")
    # Queries run in the API process's threads: a pool of query processes per test app
    # would spawn two processes per test. tests/api/test_query_processes.py runs the
    # pool (the production default), and so do the README e2e test's `tally serve --demo`
    # and tests/e2e/test_worker_processes.py's killed-server test.
    overrides.setdefault("query_processes", 0)
    return Settings(home=home, database_url=url, log_level="WARNING", **overrides)  # type: ignore[arg-type]


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(request, backend, tmp_path / "home")


@pytest.fixture
def runtime(settings: Settings) -> Iterator[Runtime]:
    rt = build_runtime(settings)
    yield rt
    rt.close()


@pytest.fixture
def uncached(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Iterator[Runtime]:
    """A runtime with the response cache off: every read reaches the page query."""
    runtime = build_runtime(
        make_settings(request, backend, tmp_path / "home", response_cache=False)
    )
    yield runtime
    runtime.close()


@pytest.fixture
def api(runtime: Runtime) -> Iterator[httpx.Client]:
    """An HTTP client for tally served by uvicorn on a loopback port."""
    with (
        serve_app(create_app(runtime.settings, runtime)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client
