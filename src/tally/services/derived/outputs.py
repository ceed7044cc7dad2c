"""What every kind of derived resource (reconciliation, transformation) does the same
way with its output: create it, find a workspace's own record, and delete both.

The output is an ordinary resource of the derived resource's kind, named after it; a
run (runs.py) replaces its table. Kept here so the kinds differ only in what
their definitions mean, not in how their outputs live and die.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection

from tally.core.columns import Column
from tally.core.errors import (
    ConflictError,
    FieldProblem,
    NotFoundError,
)
from tally.storage import outbox, resources
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import records as derived_resources
from tally.storage.derived.records import DerivedRecord
from tally.storage.resource_tables import ddl


def create_output(
    conn: Connection,
    *,
    workspace_id: int,
    kind: str,
    name: str,
    columns: tuple[Column, ...],
    now: dt.datetime,
) -> int:
    """The output resource and its empty table; a concurrent taker of the name is the
    same 400 as one found first, a table that cannot be made the 502."""
    output = resources.create_resource(
        conn,
        workspace_id=workspace_id,
        name=name,
        kind=kind,
        columns=columns,
        is_placeholder=False,
        folder_id=None,
        now=now,
    )
    return output.id


def owned(
    conn: Connection,
    *,
    workspace_id: int,
    derived_id: int,
    kind: str,
    not_found: type[NotFoundError],
    lock: bool = False,
) -> DerivedRecord:
    """The derived resource, if this workspace owns it; otherwise it does not exist."""
    find = derived_resources.lock_derived if lock else derived_resources.find_derived
    record = find(conn, derived_id, kind)
    if record is None or record.workspace_id != workspace_id:
        raise not_found()
    return record


def refuse_while_read(conn: Connection, resource_id: int) -> None:
    """ConflictError naming each derived resource (kind, id, name) that reads this
    resource, whatever its kind."""
    problems = []
    for reader in derived_resources.readers_of(conn, resource_id):
        found = derived_resources.find_derived(conn, reader)
        what = f"{found.kind} {reader} ({found.name!r})" if found else f"{reader}"
        problems.append(
            FieldProblem(
                None,
                f"{what} reads resource {resource_id}: delete it or change its definition first",
            )
        )
    if problems:
        raise ConflictError(problems)


def delete_with_output(conn: Connection, record: DerivedRecord) -> None:
    """The derived resource, its output resource and table, and a run's tables in the
    making, if any; refused (409) while another derived resource reads the output.
    Whatever else of the record's the caller deleted first in the same transaction is
    rolled back with the refusal."""
    refuse_while_read(conn, record.resource_id)
    derived_resources.delete_derived(conn, record.id)
    outbox.delete_events_of(conn, record.resource_id)
    for table in (
        resources.table_name_for(record.resource_id),
        derived_outputs.next_table(record.resource_id),
        derived_outputs.plan_table(record.resource_id),
        derived_outputs.old_table(record.resource_id),
    ):
        ddl.drop_table(conn, table)
    resources.delete_resource(conn, record.resource_id)
