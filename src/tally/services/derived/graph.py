"""The graph of derived resources: which resources an output is computed from. Shared by
every kind (a reconciliation or a transformation may not read its own output, nor what
is computed from it), so no kind imports another."""

from __future__ import annotations

from sqlalchemy import Connection

from tally.storage.derived import records as derived_records


def upstream(conn: Connection, resource_id: int) -> set[int]:
    """The resource and every resource it is computed from, however indirectly."""
    seen, pending = {resource_id}, [resource_id]
    while pending:
        for found in derived_records.inputs_of_output(conn, pending.pop()):
            if found not in seen:
                seen.add(found)
                pending.append(found)
    return seen
