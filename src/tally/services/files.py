"""A source's files as the ingestion API reports them: listed in pages, or one by id;
and a delivered file taken back (issue 32)."""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.errors import ConflictError, FieldProblem, FileNotFoundInSourceError
from tally.core.files import FileAttempt, FileRecord, FileStatus
from tally.services import file_events
from tally.services.catalogue import get_owned_source
from tally.services.row_removal import remove_file_rows
from tally.storage import file_attempts, files, outbox, resources
from tally.storage.engine import write_connection
from tally.storage.schema import is_storable_id

log = logging.getLogger("tally.delivery")


class FileService:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list_source_files(
        self, *, workspace_id: int, source_id: int, after_id: int, limit: int
    ) -> list[FileRecord]:
        """The source's files with ids above `after_id`, oldest first; 404 unless this
        workspace owns the source."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            return files.list_files(conn, source_id, limit=limit, after_id=after_id)

    def list_recent_files(
        self,
        *,
        workspace_id: int,
        source_id: int,
        before_id: int | None,
        limit: int,
        statuses: tuple[FileStatus, ...] = (),
    ) -> list[FileRecord]:
        """Newest first (the console's source page): ids below `before_id`, of `statuses`
        when given; 404 unless this workspace owns the source."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            return files.list_recent_files(
                conn, source_id, limit=limit, before_id=before_id, statuses=statuses
            )

    def get_source_file(self, *, workspace_id: int, source_id: int, file_id: int) -> FileRecord:
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            return _file_of(conn, source_id, file_id)

    def list_file_attempts(
        self, *, workspace_id: int, source_id: int, file_id: int
    ) -> list[FileAttempt]:
        """The file's attempts that did not deliver it, first first (its page)."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            _file_of(conn, source_id, file_id)
            return file_attempts.list_attempts(conn, file_id)

    def retract(self, *, workspace_id: int, source_id: int, file_id: int, by: str) -> FileRecord:
        """Take a delivered file back, in one transaction: its rows removed (manual work
        on them retired, on the others kept), its status `retracted` with who and when,
        a `file.retracted` status callback and a run of every derived resource reading
        the source. A file taken back already is answered as it is (DELETE is
        idempotent); a file that was never delivered is a 409 naming its status."""
        with write_connection(self._engine) as conn, conn.begin():
            get_owned_source(conn, workspace_id, source_id)
            source = resources.lock_resource(conn, source_id)
            record = _file_of(conn, source_id, file_id)
            if record.status is FileStatus.RETRACTED:
                return record
            if record.status is not FileStatus.DELIVERED:
                raise ConflictError(
                    [
                        FieldProblem(
                            "file_id",
                            f"file {file_id} is {record.status}: only a delivered file can "
                            "be taken back",
                        )
                    ]
                )
            now = utc_now()
            removed, kept = remove_file_rows(
                conn, source, file_id, cause=f"file {file_id} was taken back by {by}"
            )
            files.retract(conn, file_id, now=now, by=by)
            file_events.queue_event(
                conn, event=file_events.RETRACTED, resource_id=source_id, file=record, now=now
            )
            if removed:
                outbox.add_event(
                    conn,
                    topic=outbox.INPUT_CHANGED,
                    type=file_events.RETRACTED,
                    resource_id=source_id,
                    file_id=file_id,
                    payload={"source_id": source_id, "file_id": file_id, "rows_removed": removed},
                    now=now,
                )
            log.info(
                "file_retracted",
                extra={
                    "file_id": file_id,
                    "source_id": source_id,
                    "rows_removed": removed,
                    "manual_work_kept": kept.kept + kept.carried,
                    "manual_work_retired": kept.retired,
                },
            )
            return files.get_file(conn, file_id)


def _file_of(conn: Connection, source_id: int, file_id: int) -> FileRecord:
    record = files.get_file(conn, file_id) if is_storable_id(file_id) else None
    if record is None or record.resource_id != source_id:
        raise FileNotFoundInSourceError()
    return record
