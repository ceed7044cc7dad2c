"""SQLite: no commit copies the write-ahead log back into the database itself; a thread
of the engine's does, soon after (storage/wal_checkpoints.py). Observed from outside:
the database file's size, which only a checkpoint changes."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine

from support.waiting import eventually
from tally.storage import wal_checkpoints
from tally.storage.engine import create_database_engine, write_connection

PAYLOAD = "x" * 4000  # a page of its own each


def new_engine(database: Path) -> Engine:
    engine = create_database_engine(f"sqlite:///{database}", pool_size=2)
    with write_connection(engine) as conn, conn.begin():
        conn.exec_driver_sql("CREATE TABLE pages (n INTEGER PRIMARY KEY, body TEXT)")
    return engine


def write_pages(engine: Engine, count: int) -> None:
    with write_connection(engine) as conn, conn.begin():
        for _ in range(count):
            conn.exec_driver_sql("INSERT INTO pages (body) VALUES (?)", (PAYLOAD,))


def checkpointing(database: Path) -> bool:
    """Whether the database's checkpoint thread is running."""
    name = f"{wal_checkpoints.THREAD_NAME} {database}"
    return any(t.name == name for t in threading.enumerate())


def test_a_large_commit_leaves_the_checkpoint_to_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_INTERVAL_SECONDS", 2.0)
    database = tmp_path / "tally.db"
    engine = new_engine(database)  # the thread starts, and waits its interval
    size = database.stat().st_size
    write_pages(engine, 2_000)  # past SQLite's 1,000-page mark: it would checkpoint now
    assert database.stat().st_size == size  # the commit returned, its pages in the log
    eventually(
        lambda: database.stat().st_size > size + 2_000 * 4_000 or None,
        timeout=30,
        what="the pages copied into the database file",
    )
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM pages").scalar() == 2_000
    engine.dispose()


def test_the_thread_ends_when_writes_stop_and_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_INTERVAL_SECONDS", 0.05)
    monkeypatch.setattr(wal_checkpoints, "IDLE_SECONDS", 0.2)
    database = tmp_path / "tally.db"
    engine = new_engine(database)
    assert checkpointing(database)
    eventually(lambda: not checkpointing(database) or None, timeout=30, what="the thread ended")
    size = database.stat().st_size
    write_pages(engine, 50)
    assert checkpointing(database)  # back for the new commit
    eventually(lambda: database.stat().st_size > size or None, timeout=30, what="a checkpoint")
    eventually(lambda: not checkpointing(database) or None, timeout=30, what="the thread ended")
    engine.dispose()


def test_a_database_removed_is_not_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_INTERVAL_SECONDS", 0.5)
    database = tmp_path / "tally.db"
    engine = new_engine(database)
    engine.dispose()
    for path in tmp_path.glob("tally.db*"):
        path.unlink()
    # The thread ends once it has looked (after its interval: nothing to open) or, had
    # it opened the database first, after IDLE_SECONDS: either way past any making again.
    eventually(lambda: not checkpointing(database) or None, timeout=30, what="the thread ended")
    assert not database.exists()


def test_a_database_locked_when_the_thread_opens_it_is_no_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another connection holding the file's lock as the thread opens its own (the last
    connection of a process checkpointing as it closes, as `tally admin load` ends) is no
    failure: no warning in the operator's log, and the next commit's turn checkpoints."""
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_INTERVAL_SECONDS", 0.05)
    monkeypatch.setattr(wal_checkpoints, "IDLE_SECONDS", 0.2)
    database = tmp_path / "tally.db"
    new_engine(database).dispose()
    holder = sqlite3.connect(database, timeout=0, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    checkpointer = wal_checkpoints.Checkpointer(database)
    checkpointer.committed()
    eventually(lambda: not checkpointing(database) or None, timeout=30, what="a turn taken")
    holder.execute("COMMIT")
    holder.close()  # the lock goes with the connection
    assert "wal_checkpoint_failed" not in caplog.text
    engine = create_database_engine(f"sqlite:///{database}", pool_size=2)
    size = database.stat().st_size
    write_pages(engine, 50)
    eventually(lambda: database.stat().st_size > size or None, timeout=30, what="a checkpoint")
    engine.dispose()
