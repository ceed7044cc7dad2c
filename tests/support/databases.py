"""Which backends a run covers, and Settings on a fresh database of one of them.

`BACKENDS` comes from TALLY_TEST_BACKENDS (default: both). `make_settings` copies the
migrated template (a file on SQLite, a TEMPLATE database on the session's throwaway
PostgreSQL server: the `sqlite_template` / `postgres_template` fixtures of conftest.py)
so every caller gets a database of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from support.pg import create_database
from tally.settings import Settings
from tally.storage.engine import create_database_engine

BACKENDS = [b for b in os.environ.get("TALLY_TEST_BACKENDS", "sqlite,postgresql").split(",") if b]
_database_numbers = itertools.count(1)


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


@contextlib.contextmanager
def setup_engine(settings: Settings) -> Iterator[Engine]:
    """An engine of the default size on the settings' database, for what a test writes
    before the runtime under test (built with a small pool) is used: PostgreSQL builds
    a source's indexes on several connections at once."""
    engine = create_database_engine(settings.effective_database_url())
    try:
        yield engine
    finally:
        engine.dispose()


def primary_key(engine: Engine, table: str) -> str | None:
    """The name of a PostgreSQL table's primary key index; None when it has none."""
    sql = (
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = to_regclass(%(t)s) AND i.indisprimary"
    )
    with engine.connect() as conn:
        name: str | None = conn.exec_driver_sql(sql, {"t": table}).scalar()
        return name


def other_sessions(engine: Engine, condition: str) -> int:
    """PostgreSQL: the other sessions on the engine's database whose `pg_stat_activity`
    row meets `condition` (SQL)."""
    with engine.connect() as conn:
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                f"AND pid <> pg_backend_pid() AND {condition}"
            ).scalar_one()
        )
