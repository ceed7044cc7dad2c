"""SQLite: no engine reads through a memory map of the database, query processes'
included; every one (the API's, a query process's, a worker's, a command's) reads
through its connections' own page cache, so a process's RSS is the memory it needs
(decision 0020 and its later note, issue #36)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import Engine

from support.databases import make_settings
from tally.runtime import build_runtime, query_process_engine
from tally.storage.engine import create_database_engine

TABLE_BYTES = 24 * 2**20


def mapped_bytes() -> int:
    """This process's resident pages of mapped files (/proc/self/status, RssFile)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def settings_of(engine: Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        return (
            conn.exec_driver_sql("PRAGMA mmap_size").scalar_one(),
            conn.exec_driver_sql("PRAGMA cache_size").scalar_one(),
        )


def test_no_engine_maps_the_database(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    settings = make_settings(request, "sqlite", tmp_path / "home")
    runtime = build_runtime(settings)
    queries = query_process_engine(settings)
    try:
        assert settings_of(runtime.engine) == (0, -16384)
        assert settings_of(queries) == (0, -16384)
    finally:
        queries.dispose()
        runtime.close()


@pytest.mark.parametrize("mapped_here", [True, False])
def test_a_whole_table_scan_stays_out_of_the_process(tmp_path: Path, mapped_here: bool) -> None:
    """A scan of a 24 MB table leaves the process's mapped pages as they were: at most
    the connection's 16 MB cache (anonymous) holds them. `mapped_here` maps the database
    on the test's own connection, to show the measure sees a map: then its pages count
    in the process's RSS for as long as the connection lives."""
    database = tmp_path / "tally.db"
    with closing(sqlite3.connect(database)) as plain, plain:  # the rows in the file itself
        plain.execute("CREATE TABLE pages (n INTEGER PRIMARY KEY, body BLOB)")
        plain.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO pages (body) SELECT randomblob(4000) FROM n",
            (TABLE_BYTES // 4000,),
        )
    engine = create_database_engine(f"sqlite:///{database}", pool_size=1)
    try:
        with engine.connect() as conn:
            if mapped_here:
                conn.exec_driver_sql(f"PRAGMA mmap_size={2 * TABLE_BYTES}")
            before = mapped_bytes()
            scanned = conn.exec_driver_sql("SELECT sum(length(body)) FROM pages").scalar_one()
            grew = mapped_bytes() - before
        assert scanned >= TABLE_BYTES - 4000
        if mapped_here:
            assert grew > TABLE_BYTES // 2
        else:
            assert grew < 2**20
    finally:
        engine.dispose()
