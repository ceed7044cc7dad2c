"""The source catalogue: sources and their tables; a file loaded into a new or existing
source; what loads leave to the workers (rows' stored JSON text, indexes)."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.bodies import parsed
from tally.core.clock import utc_now
from tally.core.columns import FILE_ID_COLUMN, Column, ColumnType
from tally.core.encodings import DEFAULT_ENCODING, UnknownEncodingError, canonical_encoding
from tally.core.errors import (
    DefinitionRejectedError,
    FieldProblem,
    ResourceNameTakenError,
    ResourceNotFoundError,
)
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.core.limits import DEFAULT_FILE_LIMITS, FileLimits
from tally.core.names import name_problem
from tally.core.source_bodies import DeclaredSource
from tally.services.loader.load import LoadResult, ProgressCallback, load_into
from tally.services.loader.staged import FillTarget, fill_staged, publish_staged, stage_file
from tally.services.row_removal import discard_replaced, load_rows
from tally.storage import accounts, outbox, resources, staging
from tally.storage.engine import backend_of, write_connection
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource

log = logging.getLogger("tally.catalogue")

# Spec (ingestion, part 1): a webhook-fed source starts with a placeholder column.
PLACEHOLDER_COLUMNS = (Column("placeholder", "c0", ColumnType.TEXT),)
SOURCE_KIND = resources.SOURCE_KIND
ROWS_APPENDED = "rows.appended"  # outbox event: a local file's rows added to a source


def check_source_definition(
    conn: Connection,
    workspace_id: int,
    name: str,
    folder_id: int | None,
    encoding: str = DEFAULT_ENCODING,
) -> str:
    """Every reason the definition is refused, at once (400 with an errors list); the
    encoding as stored (the codec's own name)."""
    problems = []
    try:
        encoding = canonical_encoding(encoding)
    except UnknownEncodingError as error:
        problems.append(FieldProblem("encoding", str(error)))
    if (problem := name_problem(name)) is not None:
        problems.append(FieldProblem("name", problem))
    elif resources.find_resource_by_name(conn, workspace_id, name) is not None:
        problems.append(_name_taken(name))
    if folder_id is not None and not accounts.folder_belongs_to(conn, folder_id, workspace_id):
        problems.append(
            FieldProblem("folder_id", f"folder {folder_id} is not a folder of this workspace")
        )
    if problems:
        raise DefinitionRejectedError(problems)
    return encoding


def _name_taken(name: str) -> FieldProblem:
    return FieldProblem("name", f"a source named {name!r} already exists")


def create_source_in(
    conn: Connection,
    *,
    workspace_id: int,
    name: str,
    folder_id: int | None = None,
    columns: tuple[Column, ...] | None = None,
    encoding: str = DEFAULT_ENCODING,
    layout: FileLayout = PLAIN_LAYOUT,
    mode: str = resources.APPEND,
) -> Resource:
    """A source and its table, in the caller's transaction. Without `columns` it is a
    placeholder that takes its columns from its first file; every file is read in
    `encoding` (decision 0015) and `layout` (issue 32), and appends its rows or, `mode`
    `replace`, replaces them all (issue 32). Declared columns and formats are
    set only here, on a source without rows: no endpoint changes them afterwards, so
    they never have to fit rows loaded before. A table that cannot be made is
    StorageProvisioningError (the ingestion API's 502)."""
    accounts.get_workspace(conn, workspace_id)
    encoding = check_source_definition(conn, workspace_id, name, folder_id, encoding)
    declared = columns or PLACEHOLDER_COLUMNS
    try:
        resource = resources.create_resource(
            conn,
            workspace_id=workspace_id,
            name=name,
            kind=SOURCE_KIND,
            columns=declared,
            is_placeholder=columns is None,
            folder_id=folder_id,
            now=utc_now(),
            encoding=encoding,
            layout=layout,
            mode=mode,
        )
    except ResourceNameTakenError as error:  # a concurrent registration took the name
        raise DefinitionRejectedError([_name_taken(name)]) from error
    return resource


def _indexed(resource: Resource) -> tuple[Column, ...]:
    """The columns a source's indexes are built on: its own, and `_file_id` (a file's
    rows found without a scan, to take the file back)."""
    return (*resource.columns, FILE_ID_COLUMN)


def get_owned_source(conn: Connection, workspace_id: int, source_id: int) -> Resource:
    """The source, if this workspace owns it; otherwise it does not exist (404)."""
    resource = resources.find_resource(conn, source_id)
    if resource is None or resource.workspace_id != workspace_id or resource.kind != SOURCE_KIND:
        raise ResourceNotFoundError()
    return resource


class SourceCatalogue:
    """Sources loaded from local files, and what loads leave to the workers. Files are
    loaded within `limits`; on SQLite they are staged in `staging_dir` first, outside
    the write lock (decision 0013)."""

    def __init__(
        self,
        engine: Engine,
        *,
        limits: FileLimits = DEFAULT_FILE_LIMITS,
        staging_dir: Path | None = None,
    ) -> None:
        self._engine = engine
        self.limits = limits
        self._staging_dir = staging_dir
        # Resources threads of this process are finishing (how many threads each): the
        # job skips them rather than wait for the same rows' locks (and miss a run that
        # falls due meanwhile).
        self._finishing: Counter[int] = Counter()
        self._finishing_lock = threading.Lock()

    def create_source_from_file(
        self,
        *,
        workspace_id: int,
        name: str,
        path: Path,
        on_progress: ProgressCallback | None = None,
        encoding: str = DEFAULT_ENCODING,
        declared: Any = None,
    ) -> LoadResult:
        """A new source holding the file's rows, read in `encoding`, which the source
        keeps for its later files; nothing is created when the file is bad. `declared`:
        the body of `tally admin load --columns` (core.source_bodies.DeclaredSource: the
        columns, their formats, the lines to skip), refused as the API refuses its
        `columns` (InvalidBodyError naming each field); None: columns inferred.

        Returns once the rows are committed and readable. Its rows' JSON text and its
        per-column indexes come afterwards from a worker (`finish_one_unfinished`, in
        `tally serve` or `tally worker`), as after a delivery: building them takes longer
        than loading the rows (ten indexes on 1M rows: ~4 s, the rows ~2.5 s on
        PostgreSQL), and answers are the same without them, only slower until they are
        there (decisions 0010, 0011)."""
        body = parsed(DeclaredSource, declared) if declared is not None else None
        columns = body.declared_columns() if body is not None else None
        layout = body.file_layout() if body is not None else PLAIN_LAYOUT
        mode = body.mode if body is not None else resources.APPEND

        def create(conn: Connection, encoding: str) -> Resource:
            return create_source_in(
                conn,
                workspace_id=workspace_id,
                name=name,
                encoding=encoding,
                columns=columns,
                layout=layout,
                mode=mode,
            )

        if self._staging_dir is None or not backend_of(self._engine).has_one_writer:
            with write_connection(self._engine) as conn, conn.begin():
                resource = create(conn, encoding)
                return load_into(conn, resource.id, path, on_progress, limits=self.limits)
        with self._engine.connect() as conn:  # refused before the file is read
            accounts.get_workspace(conn, workspace_id)
            encoding = check_source_definition(conn, workspace_id, name, None, encoding)
        # Its scratch is found and removed by a worker's sweep if this process is killed.
        with staging.command_load(self._staging_dir) as scratch:
            filled = scratch.table if columns is None else None  # declared: rows appended
            try:
                staged = stage_file(
                    scratch.path,
                    None,
                    path,
                    encoding=encoding,
                    limits=self.limits,
                    on_progress=on_progress,
                    declared=columns,
                    layout=layout,
                    fill=FillTarget(self._engine, filled) if filled is not None else None,
                )
                with write_connection(self._engine) as conn, staging.attached(conn, scratch.path):
                    if filled is not None and not staged.in_table:
                        fill_staged(conn, staged, filled)
                    with conn.begin():
                        resource = create(conn, encoding)
                        return publish_staged(conn, resource.id, staged, filled)
            finally:
                with write_connection(self._engine) as conn, conn.begin():
                    ddl.drop_table(conn, scratch.table)

    def append_file(
        self, resource_id: int, path: Path, on_progress: ProgressCallback | None = None
    ) -> LoadResult:
        """The file's rows added to the source (or, for a source whose files replace its
        rows, in place of its rows), then finished as a worker would; the derived
        resources reading it are told, as after a delivery."""
        with write_connection(self._engine) as conn, conn.begin():
            source = resources.lock_resource(conn, resource_id)

            def load(table: str | None) -> LoadResult:
                return load_into(
                    conn, resource_id, path, on_progress, limits=self.limits, table=table
                )

            result = load_rows(conn, source, load, cause="a local file's load replaced its rows")
            outbox.add_event(
                conn,
                topic=outbox.INPUT_CHANGED,
                type=ROWS_APPENDED,
                resource_id=resource_id,
                file_id=None,
                payload={"rows": result.rows, "data_version": result.resource.data_version},
                now=utc_now(),
            )
        self.finish_resource(resource_id)
        return result

    def finish_resource(self, resource_id: int) -> None:
        """What a load leaves to the workers (decisions 0010, 0011): drop the table a
        snapshot replaced, store the JSON text of the rows that have none, then build the
        per-column indexes if they were never built. In that order: on PostgreSQL an
        UPDATE maintains every index of the table. Readers never wait, and answer the
        same before, during and after."""
        with self._finishing_lock:
            self._finishing[resource_id] += 1
        self._finish_counted(resource_id)

    def _finish_counted(self, resource_id: int) -> None:
        """`_finish`, the resource already counted in `_finishing` by the caller."""
        try:
            self._finish(resource_id)
        finally:
            with self._finishing_lock:
                self._finishing[resource_id] -= 1
                if self._finishing[resource_id] <= 0:
                    del self._finishing[resource_id]

    def _finish(self, resource_id: int) -> None:
        engine = self._engine
        with engine.connect() as conn:
            resource = resources.get_resource(conn, resource_id)
        if resource.is_placeholder:  # no file loaded yet: its table is still the placeholder's
            return
        discard_replaced(engine, resource)  # a snapshot's predecessor: its index names
        self._key_rows(resource_id)  # first: the rows' text is stored by ranges of ids
        if resource.rendered_version != resource.data_version:
            stored = resources.store_missing_text(engine, resource)
            if stored:  # another worker may have stored them first
                log.info(
                    "resource_rows_rendered", extra={"resource_id": resource_id, "rows": stored}
                )
        self.index_resource(resource_id)

    def _key_rows(self, resource_id: int) -> None:
        """PostgreSQL: the row ids' primary key, which a new source's load commits
        without (`ddl.finish_fill`: 0.15-0.5 s of a 1M-row load), built under the
        resource's lock, so never beside a load of it or another builder."""
        if backend_of(self._engine).has_one_writer:
            return
        with write_connection(self._engine) as conn, conn.begin():
            resource = resources.lock_resource(conn, resource_id)
            built = ddl.add_missing_primary_key(conn, resource.table_name)
        if built:
            log.info("resource_keyed", extra={"resource_id": resource_id})

    def index_resource(self, resource_id: int) -> None:
        """Build the per-column indexes once the rows are committed (readers never wait)."""
        engine = self._engine
        if backend_of(engine).has_one_writer:
            # one index per transaction, never the lock for all (decision 0013); a second
            # builder's CREATE INDEX IF NOT EXISTS waits for the lock, then does nothing
            with engine.connect() as conn:
                resource = resources.get_resource(conn, resource_id)
            built = resource.indexed_version == 0
            if built:
                ddl.build_indexes_in_steps(engine, resource.table_name, _indexed(resource))
            with write_connection(engine) as conn, conn.begin():
                current = resources.lock_resource(conn, resource_id)
                resources.record_indexed(conn, resource_id, current.data_version)
        else:
            with write_connection(engine) as conn, conn.begin():
                resource = resources.lock_resource(conn, resource_id)
                built = resource.indexed_version == 0  # later loads maintain them as they go
                if built:
                    ddl.build_indexes_in_steps(engine, resource.table_name, _indexed(resource))
                resources.record_indexed(conn, resource_id, resource.data_version)
        if built:
            ddl.vacuum(self._engine, resource.table_name)
            log.info("resource_indexed", extra={"resource_id": resource_id})

    def finish_one_unfinished(self) -> bool:
        """Finish one resource a load left work in (its rows' JSON text, its indexes):
        made by `tally admin load`, given a file, or left by a process that stopped
        before finishing it; False when none is left. Workers run it as a job. Two at
        once are safe: storing the text only fills what is missing, and
        `index_resource` locks the resource and checks. The job does not take a resource
        another thread of this process is finishing (here, or after its delivery): it
        would wait for that thread's rows and be kept from every other job meanwhile (a
        derived run falling due)."""
        with self._finishing_lock:
            with self._engine.connect() as conn:
                resource_id = resources.next_unfinished(conn, skip=set(self._finishing))
            if resource_id is None:
                return False
            self._finishing[resource_id] += 1  # from the choice on
        self._finish_counted(resource_id)
        return True
