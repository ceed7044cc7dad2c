"""SQLite: the write-ahead log is copied back into the database by a thread of its own.

By default SQLite checkpoints inside a commit: whichever writer's commit finds the log
past 1,000 pages copies every frame back and syncs the database file before its commit
returns. That writer is any writer: a notification's one-row insert pays for a load's
pages, and a commit that wrote 28,000 pages (10,000 rows appended under ten indexes)
takes ~0.1 s longer (0.20 s against 0.30 s, measured on this machine kind). So each
connection turns that off (`wal_autocheckpoint=0`, storage/engine.py) and this thread
does it instead, soon after commits, with a connection of its own.

A PASSIVE checkpoint takes no lock a writer or reader waits for: it copies what no reader
still needs and stops where one does, as SQLite's own does; the next writer after a
complete one starts the log again from its beginning. Durability is the commit's (the
log is synced by it); a checkpoint only moves pages. Hand-written: SQLite has no
background checkpointer, and Python's sqlite3 exposes no WAL hook, so commits signal it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path

log = logging.getLogger("tally.storage")

CHECKPOINT_INTERVAL_SECONDS = 0.5  # at most one checkpoint this often, after commits
IDLE_SECONDS = 10.0  # the thread ends after this long without a commit (and comes back)
THREAD_NAME = "tally-wal-checkpoint"  # then the database's path


class Checkpointer:
    """One per SQLite database of a process (its engines share it, storage/engine.py):
    `committed()` after a write transaction commits; a thread started on demand
    checkpoints within CHECKPOINT_INTERVAL_SECONDS, and ends when the process stops
    writing for IDLE_SECONDS (a database whose engines are dropped leaves no thread
    behind)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        self._wanted.set()
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    name = f"{THREAD_NAME} {self._path}"
                    self._thread = threading.Thread(target=self._run, name=name, daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while self._wanted.wait(IDLE_SECONDS):
                # first the interval: the commits that signalled have ended by then (the
                # signal comes just before the driver's COMMIT), and later ones wait
                time.sleep(CHECKPOINT_INTERVAL_SECONDS)
                self._wanted.clear()
                if conn is None:
                    if not self._path.exists():  # removed (a test's home): nothing to do
                        break
                    conn = _open(self._path)
                    if conn is None:  # locked for now: the next commit's turn opens it
                        continue
                checkpoint(conn)
        except Exception:  # a later commit starts a new thread; a missed one costs nothing
            log.warning("wal_checkpoint_failed", exc_info=True)
            self._wanted.clear()
        finally:
            if conn is not None:
                conn.close()
            with self._lock:
                self._thread = None
        if self._wanted.is_set():  # a commit came as this thread was ending
            self.committed()


def _open(path: Path) -> sqlite3.Connection | None:
    """The thread's connection; None while another connection holds the file's lock (the
    last one of a process checkpoints as it closes, as `tally admin load` ends)."""
    # read-write, never create: a database removed meanwhile stays gone
    uri = f"{path.resolve().as_uri()}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, timeout=0, check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous=FULL")  # the database file synced too
    except sqlite3.OperationalError as error:
        conn.close()
        if not _is_busy(error):
            raise
        return None
    return conn


def checkpoint(conn: sqlite3.Connection) -> None:
    """Copy what the log holds back into the database, as far as no reader needs it
    (SQLITE_BUSY when another checkpoint runs: that one does it)."""
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            raise


def _is_busy(error: sqlite3.OperationalError) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection has the file for now."""
    return "locked" in str(error) or "busy" in str(error)
