"""SQLite: a long job split into transactions lets the writers waiting for the one
write lock go between two of its transactions (`job_step`, `yield_to_writers`), and
never waits for them without bound. SQLite's busy handler has no queue: a job that
begins its next transaction as soon as it commits would keep them waiting for the whole
job (notifications accepted while a file's rows are moved, its text stored, its
indexes built)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time

import pytest
from sqlalchemy import Engine

from support.databases import BACKENDS
from support.waiting import eventually
from tally.runtime import Runtime
from tally.storage import engine as engine_module
from tally.storage.engine import WRITERS_SUFFIX, job_step, write_connection

pytestmark = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "sqlite"])


@pytest.fixture
def engine(runtime: Runtime) -> Engine:
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE handoff (n INTEGER PRIMARY KEY, who TEXT)")
    return runtime.engine


def writers_file(engine: Engine) -> str:
    assert engine.url.database is not None
    return engine.url.database + WRITERS_SUFFIX


def someone_writes(engine: Engine) -> bool:
    """Whether a writer has announced itself (waits for the lock, or holds it)."""
    descriptor = os.open(writers_file(engine), os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def record(engine: Engine, who: str) -> None:
    with write_connection(engine) as conn, conn.begin():
        conn.exec_driver_sql("INSERT INTO handoff (who) VALUES (?)", (who,))


def test_a_waiting_writer_goes_before_the_jobs_next_transaction(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The order, not the bound, is under test: a writer whose busy handler sleeps its
    # longest (100 ms) on a loaded CI machine may miss the 0.25 s window.
    monkeypatch.setattr(engine_module, "LONGEST_YIELD_SECONDS", 30.0)
    writer = threading.Thread(target=record, args=(engine, "writer"))
    # The job's previous transaction holds the lock without announcing itself, so that
    # `someone_writes` turns true only once the writer waits for the lock.
    assert engine.url.database is not None
    previous = sqlite3.connect(engine.url.database, isolation_level=None)
    try:
        previous.execute("BEGIN IMMEDIATE")
        previous.execute("INSERT INTO handoff (who) VALUES ('job 1')")
        writer.start()
        eventually(lambda: someone_writes(engine), timeout=10, what="the writer to wait")
        # The hard case: SQLite's busy handler (out of sight) now sleeps 100 ms between
        # tries. A shorter stay only makes the writer try sooner; the order is decided
        # by `job_step`, which waits for the writer's announcement (a lock) to end.
        time.sleep(0.5)
        previous.execute("COMMIT")
    finally:
        previous.close()
    with job_step(engine) as conn:  # at once after its commit, as a job's loop does
        conn.exec_driver_sql("INSERT INTO handoff (who) VALUES ('job 2')")
    writer.join()

    with engine.connect() as conn:
        order = conn.exec_driver_sql("SELECT who FROM handoff ORDER BY n").scalars().all()
    assert order == ["job 1", "writer", "job 2"]
    assert not someone_writes(engine)  # every transaction's announcement ended with it


def test_a_job_does_not_wait_for_a_writer_without_end(engine: Engine) -> None:
    stuck = os.open(writers_file(engine), os.O_RDWR)
    fcntl.flock(stuck, fcntl.LOCK_SH)  # announced, and never writes
    try:
        with job_step(engine) as conn:
            conn.exec_driver_sql("INSERT INTO handoff (who) VALUES ('job')")
    finally:
        os.close(stuck)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT who FROM handoff").scalars().all() == ["job"]


def fail_half_way(engine: Engine) -> None:
    with write_connection(engine) as conn, conn.begin():
        conn.exec_driver_sql("INSERT INTO handoff (who) VALUES ('rolled back')")
        raise RuntimeError("the transaction fails")


def test_a_failed_transaction_ends_its_announcement(engine: Engine) -> None:
    with pytest.raises(RuntimeError, match="fails"):
        fail_half_way(engine)
    assert not someone_writes(engine)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM handoff").scalar_one() == 0


@pytest.mark.parametrize("stream_engine", ["engine", "intake_engine"])
def test_threads_of_one_process_take_turns(
    engine: Engine, runtime: Runtime, stream_engine: str
) -> None:
    """A thread that commits and begins again at once (the notification intake under a
    stream of notifications) lets another thread's write in after its current
    transaction: SQLite's busy handler alone let the stream win for as long as it ran.
    The same when the stream writes through another engine of the database (the
    intake's own)."""
    stop = threading.Event()
    holding = threading.Event()
    streaming_engine: Engine = getattr(runtime, stream_engine)

    def stream() -> None:
        for _ in range(100):  # 2 s at most
            with write_connection(streaming_engine) as conn, conn.begin():
                conn.exec_driver_sql("INSERT INTO handoff (who) VALUES ('stream')")
                holding.set()
                time.sleep(0.02)
            if stop.is_set():
                return

    streaming = threading.Thread(target=stream)
    streaming.start()
    try:
        assert holding.wait(10)
        with engine.connect() as conn:
            before = conn.exec_driver_sql("SELECT coalesce(max(n), 0) FROM handoff").scalar_one()
        record(engine, "writer")
    finally:
        stop.set()
        streaming.join()

    with engine.connect() as conn:
        order = (
            conn.exec_driver_sql("SELECT who FROM handoff WHERE n > ? ORDER BY n", (before,))
            .scalars()
            .all()
        )
    # The stream's transaction in progress when the writer came, then the writer; or,
    # when that one commits between the look at `before` and the writer's turn (a
    # window of a statement; a fresh-clone CI run saw it once), the one after it. Without the
    # turns the stream went first for as long as it ran (up to 100 transactions).
    assert order.index("writer") <= 2, order
    assert not someone_writes(engine)
