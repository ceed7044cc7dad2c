"""What the transformation page shows, shaped from the services' answers: an error's
position in the SQL (its line, with a caret under the column), a preview's rows as the
exact text the API sends, and where each neighbour's page is.
Pure functions: no request, no service."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from tally.core.columns import ColumnType
from tally.core.errors import FieldProblem
from tally.services.derived.graph import Node

NUMERIC = frozenset({ColumnType.INTEGER, ColumnType.DECIMAL})
# How the SQL's checks end a message that has a place (services/transformations/dialect.py)
_POSITION = re.compile(r"\(line (\d+), column (\d+)\)")


@dataclass(frozen=True)
class Position:
    """Where in the SQL an error is: its line as written and a caret under the column."""

    line: int
    column: int
    text: str  # the SQL's line
    caret: str  # spaces up to the column, then ^


@dataclass(frozen=True)
class Problem:
    field: str | None  # `sql`, `name`, `inputs.s`, or None for the definition as a whole
    message: str
    position: Position | None


def problems_of(found: list[FieldProblem], sql: str) -> list[Problem]:
    """Each problem, with its place in `sql` when its message names one."""
    return [Problem(p.field, p.message, position_in(sql, p.message)) for p in found]


def position_in(sql: str, message: str) -> Position | None:
    """The last `(line L, column C)` of the message, in the SQL; None when it names none
    or a line the SQL does not have."""
    matches = _POSITION.findall(message)
    if not matches:
        return None
    line, column = (int(n) for n in matches[-1])
    lines = sql.split("\n")
    if not 1 <= line <= len(lines) or column < 1:
        return None
    text = lines[line - 1]
    # a tab before the column keeps its width in the caret's line
    lead = "".join(c if c == "\t" else " " for c in text[: column - 1])
    return Position(line, column, text, lead + "^")


def cell_texts(row: str) -> list[str]:
    """A preview row's values in column order, each the exact text the API sends (a
    decimal's digits as stored, never a float's), a NULL as ''."""
    values = json.loads(
        row, parse_float=str, parse_int=str, object_pairs_hook=lambda pairs: [v for _, v in pairs]
    )
    return [_text(v) for v in values]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def definition_digest(definition: dict[str, Any]) -> str:
    """What a page's form says it edited (its `base`): a save finds out whether the
    definition changed since, by another admin or through the API."""
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def page_of(node: Node) -> str:
    """The console page of a resource of the graph: a source's, or that of the
    reconciliation or transformation publishing it."""
    if node.derived_id is None:
        return f"/console/sources/{node.resource_id}"
    return f"/console/{node.kind}s/{node.derived_id}"
