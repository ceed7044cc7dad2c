"""Which connections a pool keeps (issue #36): it hands out the one returned last, so a
job's transactions run on one connection instead of going round every idle one; and a
connection that read a whole table on PostgreSQL is closed, not pooled, so its backend
(the shared buffers it touched, its sort memory) goes with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine

from support.databases import BACKENDS, make_settings
from tally.storage.engine import backend_of, create_database_engine, not_pooled


@pytest.fixture(params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    settings = make_settings(request, request.param, tmp_path / "home")
    engine = create_database_engine(settings.effective_database_url(), pool_size=3)
    try:
        yield engine
    finally:
        engine.dispose()


def session_of(conn: Connection) -> object:
    """What tells two database sessions apart: PostgreSQL's backend, SQLite's handle."""
    if backend_of(conn).is_postgresql:
        return conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    return id(conn.connection.dbapi_connection)


def test_the_connection_returned_last_is_handed_out_first(engine: Engine) -> None:
    with engine.connect() as first, engine.connect() as second:
        sessions = [session_of(first), session_of(second)]  # `second` is returned first
    for _ in range(3):
        with engine.connect() as conn:
            assert session_of(conn) == sessions[0]


def test_a_connection_not_pooled_is_closed_on_postgresql(engine: Engine) -> None:
    with not_pooled(engine.connect()) as conn, conn.begin():
        used = session_of(conn)
    with engine.connect() as conn:  # the pool's only connection was that one
        assert (session_of(conn) == used) is not backend_of(conn).is_postgresql
