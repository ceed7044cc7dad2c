"""SQLite's locks seen from outside: whether a new connection could take the one write
lock at once (no busy wait), for the tests that check a long job does not hold it; and
the POSIX locks a process holds on a database file, from /proc/locks, for the tests
that check no tally code drops a process's locks (issue #30)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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


def posix_locks(pid: int, path: Path) -> list[str]:
    """The POSIX locks process `pid` holds on `path`, from /proc/locks' lines `N: POSIX
    ADVISORY READ|WRITE pid maj:min:inode start end` without their number N, which
    changes as other processes' locks come and go (a waiter's line has `->`). While
    a process has a SQLite database open in WAL mode, it holds a shared lock on it."""
    inode = path.stat().st_ino
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[1] != "POSIX":
            continue
        if int(fields[4]) == pid and int(fields[5].rsplit(":", 1)[1]) == inode:
            held.append(" ".join(fields[1:]))  # not the line's number: it moves
    return held
