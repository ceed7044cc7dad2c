"""`RowExport`: every row of a filtered and sorted view of a resource as CSV, streamed
(the console's "Export CSV"), with values exactly as the Data API gives them.

The request is checked at once (its errors come before a byte is sent); the rows are
then read in one snapshot (a file landing mid-export is wholly in or wholly out), a
chunk at a time with keyset paging: each chunk starts after the last row of the one
before, so no chunk walks past the rows already sent; at most two chunks are in memory
(the one being sent, the next being read).
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from tally.core.filters import MAX_PAGE_SIZE, RowQuery
from tally.services.workspace_rows import RowsRequest, authorised_query
from tally.storage.db_errors import translated_errors
from tally.storage.engine import snapshot_connection
from tally.storage.resource_tables import pages
from tally.storage.resource_tables.pages import RowKey
from tally.storage.resources import Resource

EXPORT_CHUNK_ROWS = MAX_PAGE_SIZE  # rows read (and written out) at a time
LINE_END = "\r\n"  # RFC 4180


@dataclass(frozen=True)
class CsvExport:
    name: str  # the resource's name (the file's, once made safe by the caller)
    chunks: Iterator[bytes]  # UTF-8 CSV: the header, then the rows; not started yet


class RowExport:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def open(self, request: RowsRequest) -> CsvExport:
        """The export of `request`'s view (its page and page size ignored); raises the
        Data API's errors, and ResourceNotFoundError for another workspace's resource,
        before anything is streamed."""
        with translated_errors(), snapshot_connection(self._engine) as conn, conn.begin():
            resource, _ = authorised_query(conn, request)
        return CsvExport(resource.name, self._chunks(request))

    def _chunks(self, request: RowsRequest) -> Iterator[bytes]:
        """Runs as the response is sent; the connection is held (one read transaction
        on SQLite, REPEATABLE READ on PostgreSQL) until the last row or the client goes."""
        with translated_errors(), snapshot_connection(self._engine) as conn, conn.begin():
            resource, query = authorised_query(conn, request)
            # Descending, after a key: may rows with no value follow it? (one probe)
            ordering = query.ordering
            missing_follow = (
                ordering.column is None
                or not ordering.descending
                or pages.has_missing_values(conn, resource.table_name, ordering.column)
            )
            fetch = functools.partial(_chunk, conn, resource, query, missing_follow)
            # The next chunk is read (the driver lets go of the GIL while the database
            # works) while this one is written out and sent: never two at once on the
            # connection, and at most two chunks in memory.
            with ThreadPoolExecutor(1, thread_name_prefix="tally-export") as reader:
                ahead = reader.submit(fetch, 0, None)
                yield _header(query)  # while the first chunk is read
                offset = 0
                while True:
                    lines, start = ahead.result()
                    offset += len(lines)
                    if start is not None:
                        ahead = reader.submit(fetch, offset, start)
                    if lines:
                        yield (LINE_END.join(lines) + LINE_END).encode()
                    if start is None:
                        return


def _header(query: RowQuery) -> bytes:
    """The column labels, as Python's `csv` writes them (the lines match)."""
    header = io.StringIO()
    csv.writer(header, lineterminator=LINE_END).writerow(c.name for c in query.fields)
    return header.getvalue().encode()


def _chunk(
    conn: Connection,
    resource: Resource,
    query: RowQuery,
    missing_follow: bool,
    offset: int,
    start: RowKey | None,
) -> tuple[list[str], RowKey | None]:
    """The CSV lines of the rows after `start` (the view's row at `offset - 1`), and
    the key to start the next chunk after (None: this was the last)."""
    page = pages.select_csv_page(
        conn,
        resource.table_name,
        resource.columns,
        query,
        offset=offset,
        limit=EXPORT_CHUNK_ROWS,
        # An upper bound is enough: it only tells whether the rest may fit in one page.
        matching=resource.row_count,
        start=None if start is None else (offset, start),
        missing_follow=missing_follow,
    )
    if len(page.lines) < EXPORT_CHUNK_ROWS:
        return page.lines, None
    return page.lines, page.checkpoints[offset + len(page.lines)]
