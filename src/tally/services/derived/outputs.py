"""What every kind of derived resource (reconciliation, transformation) does the same
way with its output when it goes: refuse while another derived resource reads it, and
delete it with the record.

The output is an ordinary resource of the derived resource's kind, named after it,
created with the record (lifecycle.py); a run (runs.py) replaces its table. Kept here
so the kinds differ only in what their definitions mean, not in how their outputs live
and die.
"""

from __future__ import annotations

from sqlalchemy import Connection

from tally.core.errors import (
    ConflictError,
    FieldProblem,
)
from tally.storage import outbox, resources
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.resource_tables import ddl


def refuse_while_read(conn: Connection, resource_id: int) -> None:
    """ConflictError naming each derived resource (kind, id, name) that reads this
    resource, whatever its kind."""
    problems = []
    for reader in derived_records.readers_of(conn, resource_id):
        found = derived_records.find_derived(conn, reader)
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
    derived_records.delete_derived(conn, record.id)
    outbox.delete_events_of(conn, record.resource_id)
    for table in (
        resources.table_name_for(record.resource_id),
        derived_outputs.next_table(record.resource_id),
        derived_outputs.plan_table(record.resource_id),
        derived_outputs.old_table(record.resource_id),
    ):
        ddl.drop_table(conn, table)
    resources.delete_resource(conn, record.resource_id)
