"""A transformation's definition checked against its workspace, in the caller's
transaction: its inputs (resources of the workspace, not computed from its own output)
and its SQL (query.py). Every fault is DefinitionRejectedError, the /api/v2 400, naming
`name`, `inputs`, `inputs.<name>` or `sql`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from tally.core.errors import DefinitionRejectedError, FieldProblem
from tally.core.sql_limits import SqlLimits
from tally.services.derived.graph import upstream
from tally.services.transformations.bodies import (
    INPUT_NAME_PATTERN,
    MAX_INPUTS,
    TransformationDefinitionBody,
)
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import CheckedQuery, check_sql
from tally.storage import resources
from tally.storage.resources import Resource

_INPUT_NAME_RE = re.compile(INPUT_NAME_PATTERN)


@dataclass(frozen=True)
class TransformationDefinition:
    name: str
    inputs: dict[str, int]  # SQL name -> resource id
    sql: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": dict(self.inputs), "sql": self.sql}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TransformationDefinition:
        return cls(data["name"], {k: int(v) for k, v in data["inputs"].items()}, data["sql"])


def checked_definition(
    conn: Connection,
    workspace_id: int,
    body: TransformationDefinitionBody,
    *,
    own_output: int | None,
    limits: SqlLimits,
    deadline: float,
) -> tuple[TransformationDefinition, CheckedQuery, dict[str, Resource]]:
    """The definition, its checked query and its inputs' resources, or every fault; its
    SQL within `limits`, checked by `deadline` (query.py's `check_sql`).

    An input that is not a resource of this workspace gets the same words whatever it
    is (another workspace's, none at all); one computed from this transformation's own
    output is a cycle."""
    problems: list[FieldProblem] = []
    taken = resources.find_resource_by_name(conn, workspace_id, body.name)
    if taken is not None and taken.id != own_output:
        problems.append(FieldProblem("name", f"a resource named {body.name!r} already exists"))
    if not body.inputs:
        problems.append(FieldProblem("inputs", "at least one input is needed"))
    if len(body.inputs) > MAX_INPUTS:
        problems.append(FieldProblem("inputs", f"at most {MAX_INPUTS} inputs"))
    found: dict[str, Resource] = {}
    for name, resource_id in body.inputs.items():
        problem = _input_problem(conn, workspace_id, name, resource_id, own_output, found)
        if problem is not None:
            problems.append(FieldProblem(f"inputs.{name}", problem))
    if problems:
        raise DefinitionRejectedError(problems)
    inputs = {n: Input(r.id, r.columns) for n, r in found.items()}
    query = check_sql(body.sql, inputs, limits, deadline=deadline)
    definition = TransformationDefinition(body.name, dict(body.inputs), body.sql)
    return definition, query, found


def _input_problem(
    conn: Connection,
    workspace_id: int,
    name: str,
    resource_id: int,
    own_output: int | None,
    found: dict[str, Resource],
) -> str | None:
    if not _INPUT_NAME_RE.match(name):
        return (
            "an input's name is 1 to 63 lower-case letters, digits or `_`, not starting "
            "with a digit (the SQL reads it unquoted)"
        )
    resource = resources.find_resource(conn, resource_id)
    if resource is None or resource.workspace_id != workspace_id:
        return f"no resource {resource_id} in this workspace"
    if own_output is not None and own_output in upstream(conn, resource_id):
        return (
            f"resource {resource_id} is computed from this transformation's output: "
            "reading it would make a cycle"
        )
    if resource.is_placeholder:
        return f"resource {resource_id} has no columns yet: it waits for its first file"
    found[name] = resource
    return None
