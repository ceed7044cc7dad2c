"""PostgreSQL: a group of notified files queued in two statements (decision 0021).

A group's transaction used to be six round trips to the server (BEGIN, the webhook,
NOTIFY, the files, their events, COMMIT). While a load's COPY keeps a small machine
busy, each round trip is a wait (for the server, often for the write-ahead log the load
fills, then for the intake thread to run again), and those waits, not the statements'
work, made most of a notification's time. Here a group is two statements, each its own
transaction:

1. `look_up`: the group's webhooks by the hash of their ids, with ids reserved for
   every file the group may queue (`nextval`, so a rejected notification leaves a gap,
   as a rolled-back INSERT would).
2. `queue`: the files and their `file.accepted` events inserted by one statement (two
   data-modifying CTEs) that also wakes listening workers (`pg_notify`, sent at its
   commit). It is atomic: all of the group's files and events, or none.

The webhook is read before the files are written, in a transaction of its own; under
PostgreSQL's READ COMMITTED one transaction gave no more (each statement sees what was
committed when it began), and a webhook is never changed once registered. SQLite keeps
the one transaction: its statements cost no round trip.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Connection, Table, bindparam, cast, func, insert, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.dml import Insert

from tally.storage.files import QUEUE_CHANNEL
from tally.storage.schema import files, outbox_events, webhooks
from tally.storage.webhooks import WebhookRecord, webhook_record


def _unnested_insert(table: Table, columns: Sequence[str]) -> tuple[Insert, list[str]]:
    """INSERT INTO table SELECT FROM unnest(one array a column): one statement text for
    any number of rows, compiled once. (A multi-row VALUES is compiled again for each
    group, and that compile cost the intake more CPU than the round trips it saved.)
    Returns the statement and its parameters' names, one per column."""
    names = [f"{table.name}_{column}" for column in columns]
    arrays = [
        cast(bindparam(name, type_=ARRAY(table.c[column].type)), ARRAY(table.c[column].type))
        for name, column in zip(names, columns, strict=True)
    ]
    rows = func.unnest(*arrays).table_valued(*columns).render_derived(name="given")
    return insert(table).from_select(list(columns), select(rows)), names


_FILE_COLUMNS = [column.name for column in files.c]
_EVENT_COLUMNS = [column.name for column in outbox_events.c if column.name != "id"]
_INSERT_FILES, _FILE_PARAMETERS = _unnested_insert(files, _FILE_COLUMNS)
_INSERT_EVENTS, _EVENT_PARAMETERS = _unnested_insert(outbox_events, _EVENT_COLUMNS)
# Built once: the accept path runs them for every group.
_QUEUE = select(func.pg_notify(QUEUE_CHANNEL, "")).add_cte(
    _INSERT_FILES.cte("queued_files"), _INSERT_EVENTS.cte("queued_events")
)
_RESERVED_IDS = (
    select(func.array_agg(func.nextval(func.pg_get_serial_sequence("files", "id"))))
    .select_from(func.generate_series(1, bindparam("count")))
    .scalar_subquery()
)
_LOOK_UP = select(webhooks, _RESERVED_IDS.label("reserved_file_ids")).where(
    webhooks.c.webhook_id_hash.in_(bindparam("hashes", expanding=True))
)


def look_up(
    conn: Connection, hashes: Collection[str], count: int
) -> tuple[dict[str, WebhookRecord], list[int]]:
    """The webhooks of these id hashes (by hash) and `count` new file ids, in one
    statement. No webhook found: no ids either (the group queues nothing)."""
    found = conn.execute(_LOOK_UP, {"hashes": list(hashes), "count": count}).all()
    hooks = {row.webhook_id_hash: webhook_record(row) for row in found}
    return hooks, list(found[0].reserved_file_ids) if found else []


def queue(
    conn: Connection, file_rows: Sequence[dict[str, Any]], event_rows: Sequence[dict[str, Any]]
) -> None:
    """Insert the files (rows with their reserved `id`) and their events, and wake the
    listening workers, in one statement. A column a row leaves out is NULL."""
    parameters = _columns(_FILE_PARAMETERS, _FILE_COLUMNS, file_rows)
    parameters |= _columns(_EVENT_PARAMETERS, _EVENT_COLUMNS, event_rows)
    conn.execute(_QUEUE, parameters)


def _columns(
    names: Sequence[str], columns: Sequence[str], rows: Sequence[dict[str, Any]]
) -> dict[str, list[Any]]:
    return {
        name: [row.get(column) for row in rows] for name, column in zip(names, columns, strict=True)
    }
