"""SQLite's one write lock, probed from outside: whether a new connection could take it
at once (no busy wait), for the tests that check a long job does not hold it."""

from __future__ import annotations

import sqlite3

from tally.runtime import Runtime


def write_lock_is_free(runtime: Runtime) -> bool:
    path = runtime.engine.url.database
    assert path is not None
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        if "locked" not in str(error):
            raise
        return False
    finally:
        other.close()
    return True
