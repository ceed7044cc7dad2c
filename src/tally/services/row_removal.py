"""A source's rows removed in the caller's transaction, its manual work found again
afterwards (services/reconciliation/kept_work.py): all of them before a snapshot's
new rows, or one file's when the file is taken back (issue 32)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.services.loader.load import LoadResult
from tally.storage import resources
from tally.storage.resource_tables import ddl, source_rows
from tally.storage.resources import Resource

if TYPE_CHECKING:
    from tally.services.reconciliation.kept_work import KeptCounts


def load_rows(
    conn: Connection, source: Resource, load: Callable[[str | None], LoadResult], *, cause: str
) -> LoadResult:
    """A file's rows, in the caller's transaction: appended by `load` (given None: the
    source's own table), or, for a source whose files replace its rows and that has
    rows, `replace_rows` (`cause` says which file, for the manual work's reasons)."""
    if source.replaces_rows and not source.is_placeholder:
        return replace_rows(conn, source, load, cause=cause)
    return load(None)


def replace_rows(
    conn: Connection, source: Resource, load: Callable[[str], LoadResult], *, cause: str
) -> LoadResult:
    """A snapshot, in the caller's transaction: `load` its rows into a table of their own
    (given its name), which then replaces the source's (readers see the old rows or the
    new, never a mix); manual work on rows that come back is kept
    (services/reconciliation/kept_work.py). The new table is indexed by a worker, as a
    new source's is, once the old one is dropped (`discard_replaced`)."""
    # Imported here: the reconciliations' engine (numpy, their models) was a third of
    # the start-up of `tally admin load`, whose new source has no rows to replace (#36).
    from tally.services.reconciliation.kept_work import kept_across_removal

    now = utc_now()
    with kept_across_removal(conn, source, cause, now):
        fresh = source_rows.create_replacement(conn, source.table_name, source.columns)
        resources.record_removal(
            conn, source, removed_rows=source.row_count, now=now, indexes_dropped=True
        )
        result = load(fresh)
        source_rows.swap_in(conn, source.table_name, fresh)
        return result


def discard_replaced(engine: Engine, source: Resource) -> None:
    """The table a snapshot replaced, dropped a step at a time (none: nothing to do).
    Before the new table's indexes are built: the old one's have their names."""
    ddl.drop_in_steps(engine, source_rows.replaced_table(source.table_name))


def remove_file_rows(
    conn: Connection, source: Resource, file_id: int, *, cause: str
) -> tuple[int, KeptCounts]:
    """The rows file `file_id` inserted, removed (a file taken back); how many, and what
    became of the manual work on the source."""
    from tally.services.reconciliation.kept_work import kept_across_removal  # as above

    now = utc_now()
    with kept_across_removal(conn, source, cause, now) as counts:
        removed = source_rows.delete_file_rows(conn, source.table_name, file_id)
        if removed:
            resources.record_removal(conn, source, removed_rows=removed, now=now)
    return removed, counts
