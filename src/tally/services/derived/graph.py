"""The graph of derived resources: which resources an output is computed from, and which
read it. Shared by every kind (a reconciliation or a transformation may not read its own
output, nor what is computed from it; a page shows its inputs and readers), so no kind
imports another."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection

from tally.storage import resources
from tally.storage.derived import records as derived_records


@dataclass(frozen=True)
class Node:
    """A resource of the graph, with the reconciliation or transformation that publishes
    it (None for a source): where a page links to."""

    resource_id: int
    name: str
    kind: str  # source | reconciliation | transformation
    derived_id: int | None


@dataclass(frozen=True)
class Neighbours:
    """What a derived resource reads (by resource id) and the derived resources reading
    its output (by their outputs), each in id order."""

    inputs: dict[int, Node]
    readers: list[Node]


def upstream(conn: Connection, resource_id: int) -> set[int]:
    """The resource and every resource it is computed from, however indirectly."""
    seen, pending = {resource_id}, [resource_id]
    while pending:
        for found in derived_records.inputs_of_output(conn, pending.pop()):
            if found not in seen:
                seen.add(found)
                pending.append(found)
    return seen


def neighbours(conn: Connection, output_id: int) -> Neighbours:
    """The inputs and the readers of the derived resource publishing `output_id`."""
    inputs = {r: _node(conn, r) for r in derived_records.inputs_of_output(conn, output_id)}
    readers = []
    for derived_id in derived_records.readers_of(conn, output_id):
        record = derived_records.find_derived(conn, derived_id)
        if record is not None:
            readers.append(Node(record.resource_id, record.name, record.kind, record.id))
    return Neighbours(inputs, readers)


def _node(conn: Connection, resource_id: int) -> Node:
    resource = resources.get_resource(conn, resource_id)
    publisher = derived_records.find_derived_by_output(conn, resource_id)
    return Node(resource.id, resource.name, resource.kind, publisher.id if publisher else None)
