"""SQLite: a file read, checked and converted outside the write lock, then published in
a short transaction (decision 0013).

`stage_file` runs the loader's usual passes taking no lock of the main database but for
short transactions of its own. A source's first file is written into a table nothing
reads yet, in the main database, in short transactions (a large one while a second
process checks it, as its head suggests: `_filled`), which `publish_staged` renames into
place. A later file's rows are checked and converted into a staging database of the
file's own (storage/staging.py), then appended by `publish_staged` in one statement;
so is a large first file whose head suggests no columns, staged as its text and
converted as `fill_staged` copies it into its table. The caller opens the publishing
transaction, with the staging database attached, and checks its own conditions in it
(a lease, a duplicate, a free name).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.core.limits import FileLimits
from tally.services.loader.limits import check_width, table_refused
from tally.services.loader.load import (
    GUESS_BATCHES,
    PARALLEL_CHECK_MIN_BYTES,
    FirstPass,
    LoadResult,
    ProgressCallback,
    check_rescale,
    checked_while_staging,
    first_pass,
    guessed_columns,
    row_batches,
)
from tally.services.loader.reader import FileFormat, detect_format, read_head
from tally.storage import resources, staging
from tally.storage.bulk_load.interface import Expected
from tally.storage.bulk_load.sqlite import SqliteBulkLoad, SqliteTableFill
from tally.storage.engine import write_connection
from tally.storage.resource_tables import ddl
from tally.storage.resources import Resource


@dataclass(frozen=True)
class StagedFile:
    """A file converted into a staging database, checked against the resource's
    columns at the time (None: a placeholder's, or a source not created yet)."""

    path: Path
    columns: tuple[Column, ...]  # in the stored order
    rows: int
    checked_against: tuple[Column, ...] | None
    widened_at: dict[str, int]
    warnings: tuple[str, ...] = ()  # shown in the file's status
    # The rows as the file's text (staging.RAW_TABLE), and the SQL converting each
    # column as they are copied out; None: converted already (staging.STAGED_TABLE).
    converted_by: tuple[str, ...] | None = None
    # The rows are in the fill target's table already (`FillTarget`): nothing to fill.
    in_table: bool = False


class StagingOutdatedError(Exception):
    """Another file changed the resource's columns since this one was staged: it must
    be checked again."""


@dataclass(frozen=True)
class FillTarget:
    """Where a placeholder's large file may be written while it is checked: `table`,
    the table `fill_staged` would fill (nothing reads it until it is published), in the
    main database of `engine`; `file_id`, the file its rows come from (None: a `tally
    admin load`)."""

    engine: Engine
    table: str
    file_id: int | None = None


def stage_file(
    staging_path: Path,
    resource: Resource | None,
    path: Path,
    *,
    encoding: str,
    limits: FileLimits,
    on_progress: ProgressCallback | None = None,
    declared: tuple[Column, ...] | None = None,
    layout: FileLayout | None = None,
    fill: FillTarget | None = None,
) -> StagedFile:
    """Read the file in `encoding`, check it and convert it into a fresh staging database
    at `staging_path`, for `resource` as it is now (None: a source created when the file
    is published, with the `declared` columns, or a placeholder), read in `layout`
    (None: the resource's).

    A placeholder's file goes straight into `fill`'s table when given
    (`StagedFile.in_table`, see `_filled`): its rows written once, not staged and then
    copied. A large one whose head suggests no columns, or any without `fill`, is staged
    as its text where SQL alone converts it (`StagedFile.converted_by`), for
    `fill_staged` to convert as it copies."""
    if resource is not None:
        declared = None if resource.is_placeholder else resource.columns
    if layout is None:
        layout = resource.layout if resource is not None else PLAIN_LAYOUT
    file_format = detect_format(path, encoding, limits, layout)
    header = read_head(path, file_format, batches=0).header
    check_width(header, limits)
    known = declared
    large = path.stat().st_size >= PARALLEL_CHECK_MIN_BYTES
    first, in_table = None, False
    # made before any row is written: what a killed attempt leaves is as it always was
    engine = staging.staging_engine(staging_path)
    try:
        with table_refused(len(header)):
            if fill is not None and known is None:
                first, in_table = _filled(
                    fill, path, file_format, large=large, on_progress=on_progress
                )
            with engine.connect() as conn, conn.begin():
                bulk = SqliteBulkLoad(conn, staging.STAGED_TABLE, raw_table=staging.RAW_TABLE)
                try:
                    if first is None:
                        first = (
                            checked_while_staging(bulk, path, file_format, known, on_progress)
                            if large
                            else first_pass(path, file_format, known, on_progress)
                        )
                    bulk.settle(first.reading(), first.ordered)
                    settled = {c.physical: c for c in first.ordered}
                    columns = tuple(settled[c.physical] for c in known or first.ordered)
                    converted_by = None
                    if not in_table:
                        converted_by = _converted(
                            bulk,
                            conn,
                            path,
                            file_format,
                            first,
                            columns,
                            first_file=known is None,
                            on_progress=on_progress,
                        )
                finally:
                    bulk.abort()
    finally:
        engine.dispose()
    return StagedFile(
        staging_path,
        columns,
        first.rows,
        known,
        dict(first.widened_at),
        tuple(first.warnings),
        converted_by,
        in_table,
    )


def _filled(
    fill: FillTarget,
    path: Path,
    file_format: FileFormat,
    *,
    large: bool,
    on_progress: ProgressCallback | None,
) -> tuple[FirstPass | None, bool]:
    """A placeholder's file written into `fill`'s table: a large one while a second
    process checks it, as its head suggests, and again once checked if the checks
    settled other columns; a small one once checked. Pass 1's result, and whether the
    rows are in the table; (None, False) for a large file whose head suggests nothing
    (it is staged as its text beside the checks instead)."""
    guessed = None
    if large:
        guessed = guessed_columns(read_head(path, file_format, batches=GUESS_BATCHES))
        if guessed is None:
            return None, False
    with write_connection(fill.engine) as conn:
        if guessed is not None:
            columns, shapes = guessed
            bulk = SqliteTableFill(conn, fill.table, shapes, file_id=fill.file_id)
            try:
                expected = Expected(columns, create=True)
                first = checked_while_staging(bulk, path, file_format, None, on_progress, expected)
                if bulk.keep(first.ordered, first.shapes, first.rows):
                    return first, True
            finally:
                bulk.abort()
        else:
            first = first_pass(path, file_format, None, on_progress)
        bulk = SqliteTableFill(conn, fill.table, first.shapes, file_id=fill.file_id)
        try:
            expected = Expected(tuple(first.ordered), create=True)
            batches = row_batches(path, file_format, on_progress)
            bulk.stage_rows(batches, len(first.ordered), expected)
            return first, bulk.keep(first.ordered, first.shapes, first.rows)
        finally:
            bulk.abort()


def _converted(
    bulk: SqliteBulkLoad,
    conn: Connection,
    path: Path,
    file_format: FileFormat,
    first: FirstPass,
    columns: tuple[Column, ...],
    *,
    first_file: bool,
    on_progress: ProgressCallback | None,
) -> tuple[str, ...] | None:
    """The rows converted into the staging database; or, a first file staged as its
    text, left so, and the SQL converting them as `fill_staged` copies them out (a later
    file is appended inside the publishing transaction: converted here)."""
    if first_file and (taken := bulk.take_staged(columns, first.shapes)) is not None:
        return taken
    staging.create_staged_table(conn, columns)
    stored = {c.physical: c for c in columns}
    ordered = [stored[c.physical] for c in first.ordered]
    bulk.append(ordered, first.shapes, row_batches(path, file_format, on_progress))
    return None


def fill_staged(
    conn: Connection, staged: StagedFile, table: str, *, file_id: int | None = None
) -> None:
    """A placeholder's first file: its rows copied, in short transactions, into `table`,
    which nothing reads until `publish_staged` renames it into place; `file_id`: the
    file record they come from (their `_file_id`; None: a `tally admin load`)."""
    with table_refused(len(staged.columns)):
        with conn.begin():
            ddl.drop_table(conn, table)
            ddl.create_table(conn, table, staged.columns, file_ids=True)
        raw = staged.converted_by is not None
        staging.fill_in_chunks(
            conn,
            table,
            staged.columns,
            staged=staging.RAW_TABLE if raw else staging.STAGED_TABLE,
            converted=staged.converted_by,
            file_id=file_id,
        )


def publish_staged(
    conn: Connection,
    resource_id: int,
    staged: StagedFile,
    filled: str | None,
    *,
    file_id: int | None = None,
    table: str | None = None,
) -> LoadResult:
    """Inside the publishing transaction, with the staging database attached: the rows
    become the resource's (`filled` renamed into place, or appended, with `file_id`, to
    `table` when not the resource's own: a snapshot's), and its data version moves.
    Raises StagingOutdatedError when its columns changed meanwhile."""
    resource = resources.lock_resource(conn, resource_id)
    if (None if resource.is_placeholder else resource.columns) != staged.checked_against:
        raise StagingOutdatedError()
    if resource.is_placeholder:
        assert filled is not None
        staging.replace_table(conn, resource.table_name, filled)
    else:
        assert staged.converted_by is None  # staged raw only for a placeholder's table
        table = table or resource.table_name
        for old, new in zip(resource.columns, staged.columns, strict=True):
            if new.scale > old.scale:
                check_rescale(conn, table, old, new, staged.widened_at.get(new.physical))
                ddl.widen_column(conn, table, old, new)
        staging.append_staged(conn, table, staged.columns, file_id=file_id)
    updated = resources.record_load(
        conn, resource, columns=staged.columns, added_rows=staged.rows, now=utc_now()
    )
    return LoadResult(updated, staged.rows, staged.warnings)
