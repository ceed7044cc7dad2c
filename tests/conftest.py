"""Fixtures shared by every test level: both backends, real servers, fresh databases,
and the tenants and the ledger most API and integration tests start from.

Each test that takes `runtime` runs twice, on SQLite and on PostgreSQL (a throwaway
server started once per session from the installed binaries). Each test gets its own
database, copied from a template migrated once. TALLY_TEST_BACKENDS=sqlite narrows
a local run; CI runs both.

Only fixtures live here: the functions and constants tests import are in tests/support/
(no test imports conftest).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.databases import BACKENDS, make_settings
from support.factories import LEDGER_CSV, Tenant, make_source, make_tenant
from support.machine_speed import register_profile, speed_checks
from support.pg import PostgresServer, create_database, reap_orphans, start_postgres
from support.servers import serve_app
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings
from tally.storage.engine import create_database_engine
from tally.storage.migrate import upgrade_database
from tally.storage.resources import Resource

register_profile()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a Hypothesis test whose settings measure the machine's speed."""
    for item in items:
        chosen = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings", None)
        if chosen is not None and (found := speed_checks(chosen)):
            raise pytest.UsageError(f"{item.nodeid}: {', '.join(found)} depends on the machine")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    reap_orphans()  # the clusters of killed runs
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


@pytest.fixture
def tenant(runtime: Runtime) -> Tenant:
    """An account with one workspace and an API key; ingestion (API v2) off."""
    return make_tenant(runtime.engine)


@pytest.fixture
def ingestion_tenant(runtime: Runtime) -> Tenant:
    """Like `tenant`, with ingestion enabled: the ingestion API (v2) answers its key."""
    return make_tenant(runtime.engine, ingestion=True)


@pytest.fixture
def ledger(runtime: Runtime, tenant: Tenant) -> Resource:
    """The tenant's source loaded from `LEDGER_CSV`."""
    return make_source(runtime.engine, tenant, LEDGER_CSV)
