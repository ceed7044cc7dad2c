"""No tally code drops the POSIX locks a process's SQLite connections hold (issue #30).

Closing any descriptor of a database file releases every POSIX lock the process holds
on it; SQLite's own opens defer such closes, tally's must never make one. Here, in one
process holding a connection: a second engine on the same file (as `tally serve` makes
one for its API beside its worker's), a checkpoint by the engine's own thread, and the
home made private again. Each kept the lock in the code before the fix but the second
engine, whose `prepare_sqlite_file` opened and closed the database file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from support.sqlite_lock import posix_locks
from tally.storage import wal_checkpoints
from tally.storage.engine import create_database_engine, write_connection
from tally.storage.home import prepare_home, prepare_sqlite_file


def test_a_second_engine_a_checkpoint_and_the_home_check_keep_the_process_locks(
    tmp_path: Path,
) -> None:
    database = tmp_path / "home" / "tally.db"
    first = create_database_engine(f"sqlite:///{database}", pool_size=1)
    with write_connection(first) as conn, conn.begin():
        conn.exec_driver_sql("CREATE TABLE t (n INTEGER)")
    held = posix_locks(os.getpid(), database)
    assert held  # the pooled connection's shared lock: the database is in use

    second = create_database_engine(f"sqlite:///{database}", pool_size=1)
    with write_connection(second) as conn, conn.begin():
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
    second.dispose()
    assert posix_locks(os.getpid(), database) == held

    # What the checkpoint thread does: a connection of its own, opened and closed.
    own = sqlite3.connect(database)
    wal_checkpoints.checkpoint(own)
    own.close()
    assert posix_locks(os.getpid(), database) == held

    prepare_home(database.parent)
    prepare_sqlite_file(database)
    assert posix_locks(os.getpid(), database) == held
    first.dispose()
    assert posix_locks(os.getpid(), database) == []
