"""Queries for files: the delivery queue. A file row is its own job.

Claiming takes a lease (storage/leases.py: SKIP LOCKED on PostgreSQL, one writer on
SQLite): a worker that dies loses its lease when it expires and the file is taken up
again. A transaction that queues files also wakes idle workers, so they start at once
instead of at their next poll: every process's on PostgreSQL (NOTIFY), its own
process's on SQLite.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Sequence
from functools import partial
from operator import attrgetter
from threading import Event, Lock
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, and_, exc, insert, select, update

from tally.core.errors import FileNotFoundInSourceError
from tally.core.files import ACTIVE_STATUSES, FileRecord, FileStatus
from tally.storage.engine import at_commit, backend_of
from tally.storage.leases import Leases
from tally.storage.schema import MAX_ID, files

QUEUE_CHANNEL = "tally_files_queued"  # PostgreSQL NOTIFY channel: files were queued
LISTEN_CHECK_SECONDS = 1.0  # how often a listener looks at its stop event
_IDS_PER_QUERY = 500  # under every backend's limit on a statement's parameters
_LEASES = Leases(files)


# Built once: the accept path inserts files all the time, and building the statement
# (and its cache key) each time cost more than running it.
_INSERT_FILE = insert(files).returning(files)
_INSERT_FILES = insert(files).returning(files, sort_by_parameter_order=True)
# SQLAlchemy keeps RETURNING rows in parameter order with a sentinel it has none of on
# SQLite, so there it sends `_INSERT_FILES` as one INSERT per row; this is one INSERT.
_INSERT_FILES_UNORDERED = insert(files).returning(files)


def new_file_values(
    *,
    resource_id: int,
    webhook_id: int | None,
    origin: str,
    url_encrypted: str | None,
    url_redacted: str | None,
    filename: str | None,
    idempotency_key: str | None,
    blob_path: str | None,
    sha256: str | None,
    size: int | None,
    now: dt.datetime,
    give_up_at: dt.datetime,
    encoding: str | None = None,
    uploaded_by: str | None = None,
) -> dict[str, Any]:
    """The row of a newly queued file; `encoding` only when its bytes are not in the
    source's (CSV tally made from JSON rows); `uploaded_by` for an upload: who sent it."""
    return dict(
        resource_id=resource_id,
        webhook_id=webhook_id,
        origin=origin,
        url_encrypted=url_encrypted,
        url_redacted=url_redacted,
        filename=filename,
        idempotency_key=idempotency_key,
        status=FileStatus.QUEUED,
        attempts=0,
        blob_path=blob_path,
        sha256=sha256,
        bytes=size,
        encoding=encoding,
        uploaded_by=uploaded_by,
        next_attempt_at=now,
        give_up_at=give_up_at,
        created_at=now,
        updated_at=now,
    )


def insert_files(conn: Connection, rows: Sequence[dict[str, Any]]) -> list[FileRecord]:
    """Queue many files (rows from `new_file_values`, without idempotency keys) in one
    multi-row INSERT; the records come back in the order given."""
    if not rows:
        return []
    _announce(conn)
    if backend_of(conn).is_postgresql:
        inserted = conn.execute(_INSERT_FILES, list(rows)).all()
    else:
        # SQLite numbers new rows in the order of the VALUES (the largest id so far plus
        # one) but returns them in any order: id order is the order given. One statement
        # instead of one per row: on the accept path each one releases the GIL, and the
        # intake thread then waits for the busy event loop to hand it back.
        inserted = sorted(
            conn.execute(_INSERT_FILES_UNORDERED, list(rows)).all(), key=attrgetter("id")
        )
    return [FileRecord.from_row(row) for row in inserted]


def insert_file(conn: Connection, values: dict[str, Any]) -> tuple[FileRecord, bool]:
    """Queue a file (a row from `new_file_values`); (record, created). With an idempotency
    key already used for this source, the existing file is returned and nothing is
    queued."""
    resource_id, idempotency_key = values["resource_id"], values["idempotency_key"]
    if idempotency_key is not None:
        existing = find_by_idempotency_key(conn, resource_id, idempotency_key)
        if existing is not None:
            return existing, False
        _announce(conn)
        try:
            with conn.begin_nested():
                row = conn.execute(_INSERT_FILE, values).one()
        except exc.IntegrityError:  # a concurrent retry won the race
            found = find_by_idempotency_key(conn, resource_id, idempotency_key)
            assert found is not None
            return found, False
        return FileRecord.from_row(row), True
    _announce(conn)
    row = conn.execute(_INSERT_FILE, values).one()
    return FileRecord.from_row(row), True


def _announce(conn: Connection) -> None:
    """Tell listening workers when this transaction commits, never on rollback:
    PostgreSQL's NOTIFY (sent at commit, once per transaction however often it is said)
    reaches every process; on SQLite only this process's listeners hear it (`tally
    serve`'s own worker), other processes' workers poll."""
    if backend_of(conn).is_postgresql:
        conn.exec_driver_sql(f"NOTIFY {QUEUE_CHANNEL}")
    else:
        at_commit(conn, partial(_wake_local_listeners, conn.engine))


# SQLite: the listeners of this process, by engine (an engine dropped takes its own).
_local_listeners: WeakKeyDictionary[Engine, set[Callable[[], None]]] = WeakKeyDictionary()
_local_lock = Lock()


def _wake_local_listeners(engine: Engine) -> None:
    with _local_lock:
        listeners = list(_local_listeners.get(engine, ()))
    for on_queued in listeners:
        on_queued()


def listen_for_queued_files(engine: Engine, on_queued: Callable[[], None], stop: Event) -> None:
    """Call `on_queued` each time a transaction that queued files commits, until `stop`
    is set. PostgreSQL: on a connection of its own, outside the pool (LISTEN holds it),
    whichever process queued them. SQLite: when this process queued them."""
    if not backend_of(engine).can_announce_commits:
        with _local_lock:
            _local_listeners.setdefault(engine, set()).add(on_queued)
        try:
            stop.wait()
        finally:
            with _local_lock:
                _local_listeners.get(engine, set()).discard(on_queued)
        return
    raw = engine.raw_connection()
    try:
        driver = raw.driver_connection
        assert driver is not None
        raw.rollback()
        driver.autocommit = True
        driver.execute(f"LISTEN {QUEUE_CHANNEL}")
        while not stop.is_set():
            for _ in driver.notifies(timeout=LISTEN_CHECK_SECONDS, stop_after=1):
                on_queued()
    finally:
        raw.invalidate()  # never back to the pool in LISTEN and autocommit


def ended_or_gone(conn: Connection, file_ids: Collection[int]) -> set[int]:
    """Of `file_ids`, those final or deleted: nothing a load of theirs left is needed."""
    ids = sorted(set(file_ids))
    active: set[int] = set()
    for start in range(0, len(ids), _IDS_PER_QUERY):
        chunk = ids[start : start + _IDS_PER_QUERY]
        query = select(files.c.id).where(files.c.id.in_(chunk), files.c.status.in_(ACTIVE_STATUSES))
        active.update(conn.execute(query).scalars())
    return set(ids) - active


def find_by_idempotency_key(conn: Connection, resource_id: int, key: str) -> FileRecord | None:
    row = conn.execute(
        select(files).where(files.c.resource_id == resource_id, files.c.idempotency_key == key)
    ).first()
    return FileRecord.from_row(row) if row else None


def get_file(conn: Connection, file_id: int) -> FileRecord:
    row = conn.execute(select(files).where(files.c.id == file_id)).first()
    if row is None:
        raise FileNotFoundInSourceError()
    return FileRecord.from_row(row)


def list_files(
    conn: Connection,
    resource_id: int,
    *,
    limit: int,
    after_id: int = 0,
) -> list[FileRecord]:
    rows = conn.execute(
        select(files)
        .where(files.c.resource_id == resource_id, files.c.id > min(after_id, MAX_ID))
        .order_by(files.c.id)
        .limit(limit)
    )
    return [FileRecord.from_row(r) for r in rows]


def list_recent_files(
    conn: Connection,
    resource_id: int,
    *,
    limit: int,
    before_id: int | None = None,
    statuses: Collection[FileStatus] = (),
) -> list[FileRecord]:
    """Newest first: the files with ids below `before_id` (None: from the newest), of
    `statuses` when given (by the index on resource and id)."""
    query = select(files).where(files.c.resource_id == resource_id)
    if before_id is not None:
        query = query.where(files.c.id < min(before_id, MAX_ID))
    if statuses:
        query = query.where(files.c.status.in_(list(statuses)))
    rows = conn.execute(query.order_by(files.c.id.desc()).limit(limit))
    return [FileRecord.from_row(r) for r in rows]


def count_files(conn: Connection, resource_id: int | None = None) -> int:
    from sqlalchemy import func

    stmt = select(func.count()).select_from(files)
    if resource_id is not None:
        stmt = stmt.where(files.c.resource_id == resource_id)
    return int(conn.execute(stmt).scalar_one())


def claim_next_file(
    conn: Connection, *, worker: str, now: dt.datetime, lease_seconds: float
) -> FileRecord | None:
    """Take the oldest due file whose lease is free or expired, and lease it."""
    row = _LEASES.claim(
        conn,
        eligible=and_(files.c.status.in_(ACTIVE_STATUSES), files.c.next_attempt_at <= now),
        order_by=(files.c.next_attempt_at, files.c.id),
        worker=worker,
        now=now,
        lease_seconds=lease_seconds,
        values={"updated_at": now},
    )
    return FileRecord.from_row(row) if row else None


def holds_lease(
    conn: Connection, file_id: int, worker: str, now: dt.datetime, *, lock: bool = False
) -> bool:
    """Whether `worker` holds the lease of a file still under way."""
    active = files.c.status.in_(ACTIVE_STATUSES)
    return _LEASES.holds(conn, file_id, worker, now, also=active, lock=lock)


extend_lease = _LEASES.extend


def set_progress(
    conn: Connection,
    file_id: int,
    worker: str,
    *,
    status: FileStatus,
    now: dt.datetime,
    **values: Any,
) -> bool:
    """Record a step (status, bytes, sha256, blob path) while holding the lease."""
    result = conn.execute(
        update(files)
        .where(files.c.id == file_id, files.c.lease_owner == worker)
        .values(status=status, updated_at=now, **values)
    )
    return result.rowcount == 1


def finish(
    conn: Connection,
    file_id: int,
    *,
    status: FileStatus,
    now: dt.datetime,
    error: str | None = None,
    **values: Any,
) -> None:
    conn.execute(
        update(files)
        .where(files.c.id == file_id)
        .values(
            status=status,
            error=error,
            finished_at=now,
            updated_at=now,
            lease_owner=None,
            lease_expires_at=None,
            **values,
        )
    )


def schedule_retry(
    conn: Connection, file_id: int, *, error: str, next_attempt_at: dt.datetime, now: dt.datetime
) -> None:
    """Back to the queue (the bytes, if any, are fetched again)."""
    conn.execute(
        update(files)
        .where(files.c.id == file_id)
        .values(
            status=FileStatus.QUEUED,
            error=error,
            next_attempt_at=next_attempt_at,
            lease_owner=None,
            lease_expires_at=None,
            updated_at=now,
        )
    )


def retract(conn: Connection, file_id: int, *, now: dt.datetime, by: str) -> None:
    """A delivered file taken back (its rows are the caller's to remove)."""
    conn.execute(
        update(files)
        .where(files.c.id == file_id)
        .values(status=FileStatus.RETRACTED, retracted_at=now, retracted_by=by, updated_at=now)
    )


def current_snapshot_with_sha(conn: Connection, resource_id: int, sha256: str) -> int | None:
    """For a source whose files replace its rows: the file whose rows it holds, if its
    bytes are these (the last file delivered, unless it was taken back since)."""
    last = conn.execute(
        select(files.c.id, files.c.status, files.c.sha256)
        .where(
            files.c.resource_id == resource_id,
            files.c.status.in_((FileStatus.DELIVERED, FileStatus.RETRACTED)),
        )
        .order_by(files.c.finished_at.desc(), files.c.id.desc())
        .limit(1)
    ).first()
    if last is None or last.status != FileStatus.DELIVERED or last.sha256 != sha256:
        return None
    return int(last.id)


def find_delivered_with_sha(conn: Connection, resource_id: int, sha256: str) -> int | None:
    return conn.execute(
        select(files.c.id)
        .where(
            files.c.resource_id == resource_id,
            files.c.sha256 == sha256,
            files.c.status == FileStatus.DELIVERED,
        )
        .limit(1)
    ).scalar()
