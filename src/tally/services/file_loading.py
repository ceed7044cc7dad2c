"""A downloaded file's rows committed exactly once: the lease check, the duplicate check,
the rows, the final status and the outbox events in one transaction (decision 0003).

On PostgreSQL the whole load runs inside that transaction: its row locks keep no other
writer waiting. On SQLite, whose one write lock every writer shares, the file is read,
checked and converted into a staging database first, outside the lock, and only
published inside it (decision 0013).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.files import FileRecord, FileStatus
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.core.limits import FileLimits
from tally.services import file_events
from tally.services.loader.load import LoadResult, load_into
from tally.services.loader.pace import LoadPace
from tally.services.loader.staged import (
    FillTarget,
    StagingOutdatedError,
    fill_staged,
    publish_staged,
    stage_file,
)
from tally.services.row_removal import load_rows
from tally.storage import files, outbox, resources, staging
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl

log = logging.getLogger("tally.delivery")
# Stagings of a file whose source's columns another file changed meanwhile, before the
# file is loaded under the lock instead, as every file was before decision 0013.
STAGING_TRIES = 3
# Leftovers removed by one sweep at most; the next takes the rest.
SWEEP_ITEMS = 1000


class FileLoading:
    def __init__(
        self,
        engine: Engine,
        *,
        limits: FileLimits,
        staging_dir: Path,
        pace: LoadPace | None = None,
    ) -> None:
        self._engine = engine
        self._limits = limits
        self._staging_dir = staging_dir
        self.pace = pace  # PostgreSQL's COPY, while the API accepts notifications

    def load(self, file: FileRecord, worker: str, blob: Path) -> LoadResult | None:
        """The file delivered (its result), or None: a duplicate, or the lease was lost."""
        if backend_of(self._engine).has_one_writer:
            for _ in range(STAGING_TRIES):
                try:
                    return self._staged(file, worker, blob)
                except StagingOutdatedError:
                    continue
        with write_connection(self._engine) as conn, conn.begin():
            resources.lock_resource(conn, file.resource_id)
            return _commit(
                conn,
                file,
                worker,
                lambda table: load_into(
                    conn,
                    file.resource_id,
                    blob,
                    encoding=file.encoding,
                    limits=self._limits,
                    pace=self.pace,
                    file_id=file.id,
                    layout=_layout_of(file),
                    table=table,
                ),
            )

    def _staged(self, file: FileRecord, worker: str, blob: Path) -> LoadResult | None:
        with self._engine.connect() as conn:
            resource = resources.get_resource(conn, file.resource_id)
        path = staging.scratch_path(self._staging_dir, file.id)
        filled = (
            staging.filled_table(resource.table_name, file.id) if resource.is_placeholder else None
        )
        try:
            staged = stage_file(
                path,
                resource,
                blob,
                encoding=file.encoding or resource.encoding,
                limits=self._limits,
                layout=_layout_of(file),
                fill=FillTarget(self._engine, filled, file.id) if filled is not None else None,
            )
            with write_connection(self._engine) as conn, staging.attached(conn, path):
                if filled is not None and not staged.in_table:
                    fill_staged(conn, staged, filled, file_id=file.id)
                with conn.begin():
                    return _commit(
                        conn,
                        file,
                        worker,
                        lambda table: publish_staged(
                            conn, resource.id, staged, filled, file_id=file.id, table=table
                        ),
                    )
        finally:
            if filled is not None:
                with write_connection(self._engine) as conn, conn.begin():
                    ddl.drop_table(conn, filled)
            path.unlink(missing_ok=True)

    def discard_leftovers(self, file: FileRecord | None = None) -> int:
        """Remove what killed attempts left (staging files, tables filled and never
        published) of files that have ended or are gone: `file`'s, as it ends, or any
        file's and any killed `tally admin load`'s (at a worker's start), at most
        SWEEP_ITEMS. Each is logged once; how many
        were removed."""
        with self._engine.connect() as conn:
            if file is None:
                found = staging.leftovers(conn, self._staging_dir)
            else:
                table = staging.filled_table(resources.table_name_for(file.resource_id), file.id)
                found = staging.leftovers_of(conn, self._staging_dir, file.id, table)
            ended = files.ended_or_gone(
                conn, {item.file_id for item in found if item.file_id is not None}
            )
        # A leftover of no file is a `tally admin load` that is no longer running.
        removed = [i for i in found if i.file_id is None or i.file_id in ended][:SWEEP_ITEMS]
        for item in removed:
            staging.remove(self._engine, item)
            log.warning(
                "staging_leftover_removed", extra={"file_id": item.file_id, "leftover": item.name}
            )
        return len(removed)


def _layout_of(file: FileRecord) -> FileLayout | None:
    """The layout a file is read in: None, the source's, unless tally made its bytes
    (CSV from JSON rows, the only file with an encoding of its own: decision 0015), whose
    numbers and dates are JSON's, in the clean form, with no line around the rows."""
    return PLAIN_LAYOUT if file.encoding is not None else None


def _commit(
    conn: Connection, file: FileRecord, worker: str, load: Callable[[str | None], LoadResult]
) -> LoadResult | None:
    """Inside the file's one transaction: while the lease holds and the bytes are new,
    `load` the rows (into the table given, or the source's own: None), and record the
    final status and the events with them."""
    now = utc_now()
    current = files.get_file(conn, file.id)
    if not files.holds_lease(conn, file.id, worker, now, lock=True):
        log.warning("file_lease_lost", extra={"file_id": file.id})
        return None
    assert current.sha256 is not None
    # (the resource's row lock is held: taken by the caller on PostgreSQL; on SQLite the
    # write transaction holds the one write lock)
    source = resources.get_resource(conn, file.resource_id)
    if source.replaces_rows:  # a snapshot: new unless it is the one the source holds
        duplicate_of = files.current_snapshot_with_sha(conn, source.id, current.sha256)
    else:
        duplicate_of = files.find_delivered_with_sha(conn, source.id, current.sha256)
    if duplicate_of is not None:
        files.finish(
            conn,
            file.id,
            status=FileStatus.DUPLICATE,
            now=now,
            error=f"the same bytes were delivered as file {duplicate_of}",
        )
        file_events.queue_event(
            conn, event=file_events.DUPLICATE, resource_id=file.resource_id, file=file, now=now
        )
        return None
    result = load_rows(conn, source, load, cause=f"file {file.id} replaced its rows")
    # The final state's time is when it commits, after the load: not when the
    # transaction began, possibly minutes earlier.
    now = utc_now()
    files.finish(
        conn,
        file.id,
        status=FileStatus.DELIVERED,
        now=now,
        rows=result.rows,
        warnings=list(result.warnings) or None,
    )
    file_events.queue_event(
        conn, event=file_events.DELIVERED, resource_id=file.resource_id, file=file, now=now
    )
    outbox.add_event(
        conn,
        topic=outbox.INPUT_CHANGED,
        type=file_events.DELIVERED,
        resource_id=file.resource_id,
        file_id=file.id,
        payload={
            "source_id": file.resource_id,
            "file_id": file.id,
            "rows": result.rows,
            "data_version": result.resource.data_version,
        },
        now=now,
    )
    return result
