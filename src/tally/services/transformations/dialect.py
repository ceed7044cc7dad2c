"""The documented dialect: PostgreSQL-flavoured SQL read by sqlglot, checked to be one
SELECT over the inputs' names only, built of allowed nodes, then qualified (every column
bound to its table, `*` expanded). Rejections name the line and column, or the name,
at fault."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import OptimizeError, ParseError, TokenError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from tally.core.columns import Column
from tally.core.errors import DefinitionRejectedError, FieldProblem
from tally.services.transformations.allow_list import ALLOWED

READ_DIALECT = "postgres"
FIELD = "sql"


@dataclass(frozen=True)
class Input:
    """One name the SQL reads: a resource of the workspace and its columns in order."""

    resource_id: int
    columns: tuple[Column, ...]


class SqlText:
    """The SQL as written, for the rejections' positions."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def reject(self, message: str, node: exp.Expr | None = None) -> DefinitionRejectedError:
        return DefinitionRejectedError([FieldProblem(FIELD, message + self.where(node))])

    def where(self, node: exp.Expr | None) -> str:
        """' (line L, column C)' where the node's text starts, or '' when unknown."""
        starts = [p.meta["start"] for p in node.walk() if "start" in p.meta] if node else []
        return self.at(min(starts)) if starts else ""

    def at(self, start: int) -> str:
        """' (line L, column C)' of the character at offset `start`."""
        line = self.sql.count("\n", 0, start) + 1
        return f" (line {line}, column {start - self.sql.rfind(chr(10), 0, start)})"


def parse_select(text: SqlText) -> exp.Query:
    """The one SELECT the text holds, or a rejection."""
    try:
        statements = [s for s in sqlglot.parse(text.sql, read=READ_DIALECT) if s is not None]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        where = f" (line {first['line']}, column {first['col']})" if "line" in first else ""
        reason = str(first.get("description", error)).split(". Line")[0]
        raise text.reject(f"the SQL does not parse: {reason}{where}") from None
    except TokenError as error:
        raise text.reject(f"the SQL does not parse: {error}") from None
    if len(statements) != 1:
        found = "no statement" if not statements else f"{len(statements)} statements"
        raise text.reject(f"the SQL must be one SELECT statement, found {found}")
    statement = statements[0]
    for node in statement.walk():
        node.comments = None  # sqlglot would carry them into the translated SQL
    if not isinstance(statement, exp.Select | exp.SetOperation):
        kind = statement.key.upper() if not isinstance(statement, exp.Command) else "a command"
        raise text.reject(f"the SQL must be one SELECT statement, found {kind}")
    return statement


def check_nodes(text: SqlText, tree: exp.Query, inputs: Mapping[str, Input]) -> None:
    """Every node allowed, every table an input or a CTE of the query."""
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    for node in tree.walk():
        if type(node) not in ALLOWED:
            raise text.reject(f"{_describe(node)} is not allowed", node)
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise text.reject("WITH RECURSIVE is not allowed", node)
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier):  # FROM generate_series(...)
                raise text.reject(f"{_describe(node.this)} is not allowed", node)
            name = _table_name(node)
            if name not in inputs and name not in ctes:
                known = ", ".join(sorted(inputs)) or "none"
                raise text.reject(f"no input named '{name}' (inputs: {known})", node)


def _describe(node: exp.Expr) -> str:
    if isinstance(node, exp.TableColumn):
        return f"the table '{node.name}' used as a value"
    if isinstance(node, exp.Anonymous):
        return f"the function {str(node.this).upper()}"
    if isinstance(node, exp.Func):
        return f"the function {node.sql_name()}"
    return node.key.upper()


def _table_name(table: exp.Table) -> str:
    """The name as written, qualifiers included: `pg_catalog.pg_class` is no input."""
    parts = [p for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p]
    return ".".join(_identifier(p) for p in parts)


def _identifier(node: exp.Expr) -> str:
    quoted = isinstance(node, exp.Identifier) and node.quoted
    return node.name if quoted else node.name.lower()


def check_output_names(text: SqlText, tree: exp.Query) -> None:
    """Each output column has a name of its own (before `qualify` invents `_col_0`)."""
    select = _leftmost(tree)
    for position, projection in enumerate(select.expressions, start=1):
        if isinstance(projection, exp.Alias):
            if not projection.alias.strip():
                raise text.reject(f"output column {position} has an empty name", projection)
        elif not isinstance(projection, exp.Column | exp.Star):
            raise text.reject(
                f"output column {position} needs a name: write `{projection.sql()} AS name`",
                projection,
            )


def _leftmost(tree: exp.Expr) -> exp.Select:
    while isinstance(tree, exp.SetOperation | exp.Subquery):
        tree = tree.left if isinstance(tree, exp.SetOperation) else tree.this
    if not isinstance(tree, exp.Select):
        found = tree.key.upper()
        problem = FieldProblem(FIELD, f"the SQL must be one SELECT statement, found {found}")
        raise DefinitionRejectedError([problem])
    return tree


def qualified(text: SqlText, tree: exp.Query, inputs: Mapping[str, Input]) -> exp.Query:
    """The tree with every column bound to its table and `*` expanded; unknown and
    ambiguous columns rejected."""
    schema = MappingSchema(
        {name: {c.name: "TEXT" for c in source.columns} for name, source in inputs.items()},
        dialect=READ_DIALECT,
        normalize=False,
    )
    try:
        result = qualify(tree, schema=schema, dialect=READ_DIALECT, identify=False)
    except OptimizeError as error:
        raise text.reject(_column_problem(text, str(error), tree, inputs)) from None
    for node in result.walk():  # what qualify made of the names (`ORDER BY s`: a row)
        if type(node) not in ALLOWED:
            raise text.reject(f"{_describe(node)} is not allowed", node)
    for star in result.find_all(exp.Star):
        if not isinstance(star.parent, exp.Count):  # `*` left unexpanded: nothing to read
            raise text.reject("* needs a table to expand, or COUNT(*)", star.parent or star)
    names = [s.alias_or_name for s in _leftmost(result).expressions]
    for name in names:
        if names.count(name) > 1:
            raise text.reject(f"two output columns are named '{name}': give each its own name")
    return result


_UNRESOLVED = re.compile(
    r"Column '(?P<name>[^']*)' could not be resolved|Unknown column: (?P<n>.*)"
)


def _column_problem(
    text: SqlText, message: str, tree: exp.Query, inputs: Mapping[str, Input]
) -> str:
    match = _UNRESOLVED.search(message)
    if match is None:
        return message.split(". Line")[0]
    name = match.group("name") or match.group("n")
    column = next((c for c in tree.find_all(exp.Column) if c.name.lower() == name.lower()), None)
    holders = sorted(n for n, i in inputs.items() if any(c.name == name for c in i.columns))
    if len(holders) > 1 and column is not None and not column.table:
        return (
            f"column '{name}' is in {' and '.join(holders)}: name its table, "
            f"as in {holders[0]}.{name}" + text.where(column)
        )
    return f"unknown column '{name}'" + text.where(column)
