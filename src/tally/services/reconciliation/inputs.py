"""What a reconciliation may read: any resource of its workspace, except its own output
and the outputs computed from it (a loop). The definition is checked against those
resources' columns here, in the caller's transaction."""

from __future__ import annotations

from sqlalchemy import Connection

from tally.core.columns import Column
from tally.core.reconciliation import ReconciliationDefinition
from tally.services.derived.graph import upstream
from tally.services.reconciliation.bodies import ReconciliationDefinitionBody
from tally.services.reconciliation.definitions import check_definition
from tally.storage import resources


def checked_definition(
    conn: Connection,
    workspace_id: int,
    definition_body: ReconciliationDefinitionBody,
    *,
    own_output: int | None,
) -> tuple[ReconciliationDefinition, dict[int, tuple[Column, ...]]]:
    """The definition checked against the workspace, and the columns of its inputs.

    A reconciliation may read any resource of its workspace except its own output and
    the outputs computed from it (a loop): those are refused like a resource of another
    workspace, or one that does not exist, with the same words."""
    readable: dict[int, tuple[Column, ...] | None] = {}
    for resource_id in {definition_body.left.resource_id, definition_body.right.resource_id}:
        found = resources.find_resource(conn, resource_id)
        if found is None or found.workspace_id != workspace_id:
            continue
        if own_output is not None and own_output in upstream(conn, resource_id):
            continue
        readable[resource_id] = None if found.is_placeholder else found.columns
    taken = resources.find_resource_by_name(conn, workspace_id, definition_body.name)
    name_taken = taken is not None and taken.id != own_output
    definition = check_definition(definition_body, readable, name_taken=name_taken)
    return definition, {k: v for k, v in readable.items() if v is not None}
