"""A source's rows removed in the caller's transaction, its manual work found again
afterwards (services/reconciliation/kept_work.py): all of them before a snapshot's
new rows, or one file's when the file is taken back (issue 32)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from tally.core.clock import utc_now
from tally.services.loader.load import LoadResult
from tally.services.reconciliation.kept_work import KeptCounts, kept_across_removal
from tally.storage import resources
from tally.storage.resource_tables import source_rows
from tally.storage.resources import Resource


def replace_rows(
    conn: Connection, source: Resource, load: Callable[[], LoadResult], *, cause: str
) -> LoadResult:
    """A snapshot: the source's rows removed, then `load` its new ones, in the caller's
    transaction (readers see the old rows or the new, never a mix); manual work on rows
    that come back is kept (services/reconciliation/kept_work.py)."""
    now = utc_now()
    with kept_across_removal(conn, source, cause, now):
        source_rows.delete_rows(conn, source.table_name)
        resources.record_removal(conn, source, removed_rows=source.row_count, now=now)
        return load()


def remove_file_rows(
    conn: Connection, source: Resource, file_id: int, *, cause: str
) -> tuple[int, KeptCounts]:
    """The rows file `file_id` inserted, removed (a file taken back); how many, and what
    became of the manual work on the source."""
    now = utc_now()
    with kept_across_removal(conn, source, cause, now) as counts:
        removed = source_rows.delete_rows(conn, source.table_name, file_id=file_id)
        if removed:
            resources.record_removal(conn, source, removed_rows=removed, now=now)
    return removed, counts
