"""A reconciliation's history as the console shows and exports it: every action and
every end of one, newest first, filtered by actor and kind, a page at a time, or the
whole of it as CSV (exact: times in full ISO 8601, rows by their positions)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqlalchemy import Connection

from tally.core.reconciliation import ReconciliationDefinition
from tally.core.reconciliation_actions import HistoryEntry, HistoryFilter
from tally.storage import reconciliation_history as stored

HISTORY_PAGE_SIZE = 50
CSV_CHUNK_ENTRIES = 500  # entries written out at a time


@dataclass(frozen=True)
class HistoryPage:
    entries: list[HistoryEntry]  # newest first
    total: int  # entries the filter keeps
    page: int  # 1-based
    page_size: int
    actors: list[str]  # everyone who took or undid an action (the actor filter's choices)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))


def page_of(conn: Connection, derived_id: int, chosen: HistoryFilter, page: int) -> HistoryPage:
    """Page `page` (1-based; past the last, the last) of the filtered entries."""
    total = stored.count_history(conn, derived_id, chosen)
    pages = max(1, -(-total // HISTORY_PAGE_SIZE))
    page = min(max(page, 1), pages)
    offset = (page - 1) * HISTORY_PAGE_SIZE
    entries = stored.list_history(conn, derived_id, chosen, offset=offset, limit=HISTORY_PAGE_SIZE)
    actors = stored.history_actors(conn, derived_id)
    return HistoryPage(entries, total, page, HISTORY_PAGE_SIZE, actors)


def csv_header(definition: ReconciliationDefinition) -> list[str]:
    """The export's labels, the sides by their names."""
    return [
        "Time",
        "Kind",
        "Actor",
        "Action",
        "Match",
        f"{definition.left.name} rows",
        f"{definition.right.name} rows",
        "Reason",
        "Note",
    ]


def csv_chunks(
    definition: ReconciliationDefinition, entries: Iterable[HistoryEntry]
) -> Iterator[bytes]:
    """UTF-8 CSV (RFC 4180): the header, then a line per entry, a chunk at a time."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(csv_header(definition))
    for count, entry in enumerate(entries, start=1):
        writer.writerow(csv_line(entry))
        if count % CSV_CHUNK_ENTRIES == 0:
            yield _taken(buffer)
    yield _taken(buffer)


def csv_line(entry: HistoryEntry) -> list[str]:
    def rows(found: tuple[int, ...]) -> str:
        return " ".join(map(str, found))

    return [
        entry.at.isoformat(),
        entry.kind,
        entry.actor or "",
        str(entry.action_id),
        "" if entry.match_id is None else str(entry.match_id),
        rows(entry.left_rows),
        rows(entry.right_rows),
        entry.reason or "",
        entry.note or "",
    ]


def _taken(buffer: io.StringIO) -> bytes:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text.encode()
