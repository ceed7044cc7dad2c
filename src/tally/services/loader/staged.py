"""SQLite: a file read, checked and converted outside the write lock, then published in
a short transaction (decision 0013).

`stage_file` runs the loader's usual passes against a staging database of the file's
own (storage/staging.py), taking no lock of the main database. A source's first file
is then copied, in short transactions, into a table nothing reads yet (`fill_staged`),
which `publish_staged` renames into place; a later file's converted rows are appended
by `publish_staged` in one statement. The caller opens the publishing transaction,
with the staging database attached, and checks its own conditions in it (a lease, a
duplicate, a free name).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.core.limits import FileLimits
from tally.services.loader.limits import check_width, table_refused
from tally.services.loader.load import (
    PARALLEL_CHECK_MIN_BYTES,
    LoadResult,
    ProgressCallback,
    check_rescale,
    checked_while_staging,
    first_pass,
    row_batches,
)
from tally.services.loader.reader import detect_format, read_head
from tally.storage import resources, staging
from tally.storage.bulk_load import bulk_load_for
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


class StagingOutdatedError(Exception):
    """Another file changed the resource's columns since this one was staged: it must
    be checked again."""


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
) -> StagedFile:
    """Read the file in `encoding`, check it and convert it into a fresh staging database
    at `staging_path`, for `resource` as it is now (None: a source created when the file
    is published, with the `declared` columns, or a placeholder), read in `layout`
    (None: the resource's)."""
    if resource is not None:
        declared = None if resource.is_placeholder else resource.columns
    if layout is None:
        layout = resource.layout if resource is not None else PLAIN_LAYOUT
    file_format = detect_format(path, encoding, limits, layout)
    header = read_head(path, file_format, batches=0).header
    check_width(header, limits)
    known = declared
    engine = staging.staging_engine(staging_path)
    try:
        with table_refused(len(header)), engine.connect() as conn, conn.begin():
            bulk = bulk_load_for(conn, staging.STAGED_TABLE)
            try:
                if path.stat().st_size >= PARALLEL_CHECK_MIN_BYTES:
                    first = checked_while_staging(bulk, path, file_format, known, on_progress)
                else:
                    first = first_pass(path, file_format, known, on_progress)
                bulk.settle(first.reading(), first.ordered)
                settled = {c.physical: c for c in first.ordered}
                columns = (
                    tuple(settled[c.physical] for c in known) if known else tuple(first.ordered)
                )
                staging.create_staged_table(conn, columns)
                stored = {c.physical: c for c in columns}
                ordered = [stored[c.physical] for c in first.ordered]
                bulk.append(ordered, first.shapes, row_batches(path, file_format, on_progress))
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
    )


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
        staging.fill_in_chunks(conn, table, staged.columns, file_id=file_id)


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
