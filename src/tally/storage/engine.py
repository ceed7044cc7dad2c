"""Engine creation for both backends, and the few flags where their SQL differs.

SQLite (the embedded default) runs in WAL mode so readers never wait for the writer;
transactions begin explicitly so a writer can take the lock up front (BEGIN IMMEDIATE)
instead of failing half-way. PostgreSQL is reached through psycopg 3.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection

from tally.storage.db_errors import BusyQueuePool
from tally.storage.home import prepare_sqlite_file
from tally.storage.sql_functions import register_sql_functions
from tally.storage.wal_checkpoints import Checkpointer

SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITERS_SUFFIX = ".writers"  # beside the database: the lock file writers announce on
WRITERS = "tally_writers"  # a pooled connection's `info` key: its lock file's descriptor
# A long job waits at most this long between its transactions for the writers waiting
# for SQLite's lock: under a steady stream of them it goes on regardless, one
# transaction at a time, so it always ends.
LONGEST_YIELD_SECONDS = 0.25
# How every connection reads: through its own 16 MiB page cache, with no memory map of
# the database. Mapped pages are the kernel's page cache, shared, yet they count in the
# RSS of every process that maps them for as long as the connection lives: a
# reconciliation's run showed 1.8 GB, 1 GB of it the map (decision 0020), and under the
# Data API benchmark each of the two query processes counted up to 730 MB of it (issue
# #36; the benchmark's sum 1.7 GB, 0.8 GB unmapped). Unmapped, a read is a copy out of
# the same kernel page cache: a whole-table scan takes as long (a 384 MB table: 0.20 s,
# against 0.19 s mapped) and the Data API spent no more CPU per request (decision 0020,
# its later note). 16 MiB is also what a load wants: with 64 MiB its dirty pages filled
# the cache as the file grew (1M rows: 151 MB peak heap, against 101 MB, as fast).
SQLITE_READS = ("cache_size=-16384", "mmap_size=0")
WRITE_OPTION = "tally_write"
IN_LINE = "tally_in_line"  # a pooled connection's `info` key: it holds its database's turn
JOB_NEXT = "tally_job_next"  # `info` key: its next transaction is a long job's (no turn)
AT_COMMIT = "tally_at_commit"  # `info` key: what to call when its transaction commits


@dataclass(frozen=True)
class Backend:
    """What differs between the two databases, named by what it means."""

    is_postgresql: bool

    @property
    def supports_skip_locked(self) -> bool:
        return self.is_postgresql

    @property
    def has_one_writer(self) -> bool:
        """One write transaction at a time for the whole database (SQLite): long work is
        split into short transactions so other writers are not kept waiting."""
        return not self.is_postgresql

    @property
    def queues_groups_in_two_statements(self) -> bool:
        """A group of notified files can be queued in two statements, each its own
        transaction (`notified_groups`, decision 0021): PostgreSQL, where each statement
        is a round trip to the server worth saving."""
        return self.is_postgresql

    @property
    def can_announce_commits(self) -> bool:
        """LISTEN/NOTIFY: a commit can wake listeners in other processes."""
        return self.is_postgresql

    @property
    def name(self) -> str:
        return "postgresql" if self.is_postgresql else "sqlite"


def normalise_url(url: str) -> str:
    """Accept plain postgresql:// URLs and route them to psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


# psycopg prepares a statement run five times; PostgreSQL may then plan it once for any
# parameters, and a page or filter plan depends on the values (a broad filter wants a
# row-order scan, a narrow one its index): plan each execution for its values.
# Timestamps are read and written in UTC, and rendered as text in ISO style, whatever
# the server's or the role's defaults (a stored TIMESTAMPTZ goes through both).
PG_SESSION_OPTIONS = "-c plan_cache_mode=force_custom_plan -c timezone=UTC -c datestyle=ISO"


POOL_TIMEOUT_SECONDS = 30.0  # SQLAlchemy's own default
# Pools hand out the connection returned last, not the one idle longest, so work does
# not go round every idle connection: the API process's pool kept seven PostgreSQL
# backends, five of them 150-220 MB, each holding the shared buffers it had touched
# (issue #36), and on SQLite each connection's page cache fills. Measured only together
# with `not_pooled`, which closed most of those.
POOL_USE_LIFO = True


def create_database_engine(
    url: str,
    *,
    pool_size: int = 10,
    overflow: bool = True,
    pool_timeout: float = POOL_TIMEOUT_SECONDS,
) -> Engine:
    """`overflow`: past `pool_size`, more connections are opened for a while (SQLite 4x,
    PostgreSQL 1x); without it, `pool_size` is all an engine has (a pool of its own for
    one use: previews, the notification intake). Asking for one waits at most
    `pool_timeout`, then is BusyError (db_errors.BusyQueuePool)."""
    url = normalise_url(url)
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        prepare_sqlite_file(path)
        engine = create_engine(
            url,
            poolclass=BusyQueuePool,
            pool_size=pool_size,
            max_overflow=pool_size * 4 if overflow else 0,
            pool_timeout=pool_timeout,
            pool_use_lifo=POOL_USE_LIFO,
            connect_args={"check_same_thread": False, "timeout": 30},
        )
        _configure_sqlite(engine, path)
        return engine
    # No pre-ping: it costs a round trip per request. A connection found dead fails that
    # request with 503 and SQLAlchemy then invalidates the pool.
    return create_engine(
        url,
        poolclass=BusyQueuePool,
        pool_size=pool_size,
        max_overflow=pool_size if overflow else 0,
        pool_timeout=pool_timeout,
        pool_use_lifo=POOL_USE_LIFO,
        connect_args={"options": PG_SESSION_OPTIONS},
    )


def backend_of(engine: Engine | Connection) -> Backend:
    return Backend(is_postgresql=engine.dialect.name == "postgresql")


def _configure_sqlite(engine: Engine, path: Path) -> None:
    writers = path.with_name(path.name + WRITERS_SUFFIX)
    prepare_sqlite_file(writers)  # created 0600, as every file of TALLY_HOME

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        record.info[WRITERS] = os.open(writers, os.O_RDWR)
        # Autocommit at the driver level; SQLAlchemy's "begin" event below emits BEGIN.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in (
            "journal_mode=WAL",
            "synchronous=FULL",  # a commit survives power loss: nothing accepted is lost
            "foreign_keys=ON",
            f"busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
            *SQLITE_READS,
            "wal_autocheckpoint=0",  # a thread of its own does it (storage/wal_checkpoints.py)
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()
        register_sql_functions(dbapi_connection)

    @event.listens_for(engine, "close")
    def _on_close(_dbapi_connection: Any, record: Any) -> None:
        descriptor = record.info.pop(WRITERS, None)
        if descriptor is not None:
            os.close(descriptor)

    _line_up_writers(engine, _write_line_of(path))


@dataclass
class _WriteLine:
    """A SQLite database's writers in this process: their turns and the checkpointer.
    One per file, whatever the engines of it (the API's, the notification intake's): a
    writer of one engine takes its turn with every other."""

    checkpointer: Checkpointer
    turns: threading.Lock = field(default_factory=threading.Lock)


_write_lines: weakref.WeakValueDictionary[Path, _WriteLine] = weakref.WeakValueDictionary()
_write_lines_lock = threading.Lock()


def _write_line_of(path: Path) -> _WriteLine:
    """The file's line, made by its first engine (kept while an engine of it lives)."""
    key = path.resolve()
    with _write_lines_lock:
        line = _write_lines.get(key)
        if line is None:
            line = _write_lines[key] = _WriteLine(Checkpointer(path))
        return line


def _line_up_writers(engine: Engine, line: _WriteLine) -> None:
    """Write transactions announce themselves (see `yield_to_writers`) and take turns.

    The turns are the process's: its write transactions queue on one lock before
    SQLite's. Without it, threads of one process meet only in SQLite's busy handler,
    which sleeps and polls, so a thread that commits and begins again at once (the
    notification intake under a stream of notifications) wins nearly every time:
    registering a webhook beside 64 notifying connections waited up to 5 s (p90 0.6 s;
    with the turns at most 0.1 s). A waiting thread is woken when the lock is released
    and holds it before the releasing thread can begin again. Hand-written for the
    reason `yield_to_writers` is.

    A long job's transactions take no turn: they come after the writers waiting
    (`yield_to_writers`) and then meet them in the busy handler, as before. In turn with
    them, the 64 connections' notifications waited for a job transaction every other
    time while a 1M-row file's text and indexes were written (p99 0.25 s → 0.9 s)."""
    in_line = line.turns  # the closures below hold `line`: shared while an engine lives

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        if immediate:
            info = conn.connection.info
            fcntl.flock(info[WRITERS], fcntl.LOCK_SH)  # announced until its end
            # Past SQLite's own wait, go on without a turn and let SQLite decide, as it
            # would have: a write nested in another's transaction fails, never hangs.
            # A BEGIN that failed keeps its turn for the next.
            if not info.pop(JOB_NEXT, False) and not info.get(IN_LINE):
                info[IN_LINE] = in_line.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    def _end_turn(info: dict[Any, Any]) -> None:
        if info.pop(IN_LINE, False):
            in_line.release()
        if WRITERS in info:
            fcntl.flock(info[WRITERS], fcntl.LOCK_UN)

    @event.listens_for(engine, "commit")
    def _on_commit(conn: Connection) -> None:
        info = conn.connection.info
        _end_turn(info)
        if conn.get_execution_options().get(WRITE_OPTION, False):
            line.checkpointer.committed()
        for call in info.pop(AT_COMMIT, ()):
            call()

    @event.listens_for(engine, "rollback")
    def _on_rollback(conn: Connection) -> None:
        conn.connection.info.pop(AT_COMMIT, None)
        _end_turn(conn.connection.info)

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info.pop(JOB_NEXT, None)  # a job that yielded, then began nothing
        record.info.pop(AT_COMMIT, None)
        _end_turn(record.info)  # a transaction ended without either event


def at_commit(conn: Connection, call: Callable[[], None]) -> None:
    """SQLite: `call` once the transaction in progress commits (as its COMMIT is sent;
    a writer it wakes waits for the lock until the commit is done), never on rollback.
    For what happens within one process (PostgreSQL has NOTIFY between processes)."""
    conn.connection.info.setdefault(AT_COMMIT, []).append(call)


def snapshot_connection(engine: Engine) -> Connection:
    """A connection whose transactions read one snapshot throughout, so a count and the
    page after it agree: REPEATABLE READ on PostgreSQL (its READ COMMITTED takes a new
    snapshot per statement); SQLite's WAL transaction already reads one."""
    conn = engine.connect()
    if backend_of(conn).is_postgresql:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
    return conn


@contextmanager
def not_pooled(conn: Connection) -> Iterator[Connection]:
    """`conn`, closed once done instead of going back to its pool, on PostgreSQL: for
    work that reads a whole table (an index build, a column snapshot). Its backend
    would keep what that work touched, every shared buffer in its RSS and the sort's
    memory its allocator holds, for as long as the pooled connection lives (issue #36:
    a snapshot's backend kept 288 MB, 103 MB of it its own). A new connection costs a
    few milliseconds; SQLite's is returned to the pool as usual."""
    with conn:
        try:
            yield conn
        finally:
            if backend_of(conn).is_postgresql:
                conn.invalidate()


def autocommit_connection(engine: Engine) -> Connection:
    """A connection whose every statement is its own transaction (PostgreSQL: VACUUM,
    which runs outside any; a statement atomic on its own, without BEGIN and COMMIT's
    round trips)."""
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


def write_connection(engine: Engine) -> Connection:
    """A connection whose transactions take the write lock at BEGIN on SQLite."""
    return engine.connect().execution_options(**{WRITE_OPTION: True})


def yield_to_writers(conn: Connection) -> None:
    """SQLite, between two transactions of a long job (a load's rows moved in chunks,
    row text stored in batches, one index after another): let the writers that are
    waiting for the one write lock go first, at most LONGEST_YIELD_SECONDS.

    SQLite has no queue: a writer that finds the lock taken sleeps in its busy handler
    (1 ms, then longer, up to 100 ms) and tries again, so a job that begins its next
    transaction as soon as it commits one keeps every other writer waiting for as long
    as the job runs, and a fixed pause after each transaction doubles the job's length
    whether anyone waits or not. Every write transaction (`write_connection`) therefore
    holds a shared `flock` on a lock file beside the database from before it asks for
    the lock until it ends; here the job takes that file exclusively for an instant,
    which succeeds at once when nobody is waiting or writing, and otherwise once they
    are done. A hand-written handoff because SQLite offers none; `flock` is per open file,
    so it works between threads and processes of one machine, as SQLite itself does."""
    if backend_of(conn).is_postgresql:
        return
    conn.connection.info[JOB_NEXT] = True  # its next transaction takes no turn
    descriptor = conn.connection.info[WRITERS]
    deadline = time.monotonic() + LONGEST_YIELD_SECONDS
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.001)
            continue
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return


@contextmanager
def unsynced_commits(conn: Connection) -> Iterator[None]:
    """SQLite: this connection's commits not synced until the block ends (set between its
    transactions), for rows nothing reads until a later transaction publishes them (a
    table filled in chunks, then renamed into place). The log is written in order and
    a sync covers every frame before it, so the publishing commit (synced, as every
    commit is) makes them durable with it; a crash before it loses an unpublished table
    at most, never the database's consistency (WAL, `synchronous=NORMAL`). Saves one
    fsync per chunk."""
    if backend_of(conn).is_postgresql:
        yield
        return
    driver = conn.connection.dbapi_connection
    assert driver is not None
    (level,) = driver.execute("PRAGMA synchronous").fetchone()
    driver.execute("PRAGMA synchronous=NORMAL")
    try:
        yield
    finally:
        driver.execute(f"PRAGMA synchronous={int(level)}")


@contextmanager
def job_step(engine: Engine) -> Iterator[Connection]:
    """One write transaction of a long job split into many so that SQLite's write lock
    is never held long: after the writers waiting for it (`yield_to_writers`)."""
    with write_connection(engine) as conn:
        yield_to_writers(conn)
        with conn.begin():
            yield conn
