"""A transformation definition's body (issue #12): `{"name", "inputs": {"s": 4}, "sql"}`,
read by the API and by the CLI from a file. A body that does not fit it is
InvalidBodyError, the /api/v2 422, each problem named by its path; what the values mean
(an input of another workspace, SQL that reads what it may not) is definitions.py's,
a 400."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tally.core.bodies import WHOLE_NUMBER, Name, Strict, parsed

INPUT_NAME_PATTERN = "^[a-z_][a-z0-9_]{0,62}$"  # what the SQL names unquoted
MAX_INPUTS = 50
MAX_SQL_CHARS = 100_000


class TransformationDefinitionBody(Strict):
    name: Name = Field(description="Also the name of the output resource.")
    inputs: dict[str, Annotated[int, Field(ge=1), WHOLE_NUMBER]] = Field(
        description="The names the SQL reads, each bound to a resource of the workspace "
        "(a source, a reconciliation's output, another transformation's output).",
        json_schema_extra={
            "minProperties": 1,
            "maxProperties": MAX_INPUTS,
            "propertyNames": {"pattern": INPUT_NAME_PATTERN},
        },
    )
    sql: str = Field(
        max_length=MAX_SQL_CHARS,
        description="One SELECT over the inputs' names, in the dialect docs/transformations.md "
        "documents.",
        json_schema_extra={"minLength": 1},
    )


def parse_definition(data: Any) -> TransformationDefinitionBody:
    """The body as its model, or InvalidBodyError naming each field at fault."""
    return parsed(TransformationDefinitionBody, data)
