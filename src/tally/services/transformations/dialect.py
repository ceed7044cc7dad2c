"""The documented dialect: PostgreSQL-flavoured SQL read by sqlglot, checked to be one
SELECT over the inputs' names only, built of allowed nodes, then qualified (every column
bound to its table, `*` expanded). Rejections name the line and column, or the name,
at fault."""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import OptimizeError, ParseError, TokenError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema
from sqlglot.tokenizer_core import Token, TokenType

from tally.core.columns import Column
from tally.core.errors import DefinitionRejectedError, FieldProblem
from tally.services.transformations.allow_list import is_allowed

READ_DIALECT = "postgres"
FIELD = "sql"


@dataclass(frozen=True)
class Input:
    """One name the SQL reads: a resource of the workspace and its columns in order."""

    resource_id: int
    columns: tuple[Column, ...]


class SqlText:
    """The SQL as written, for the rejections' positions and for naming a node as the
    user wrote it (sqlglot records the positions of names and literals only)."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self._tokens: list[Token] | None = None

    def reject(self, message: str, node: exp.Expr | None = None) -> DefinitionRejectedError:
        return DefinitionRejectedError([FieldProblem(FIELD, message + self.where(node))])

    def where(self, node: exp.Expr | None) -> str:
        """' (line L, column C)' where the node's text starts, or '' when unknown."""
        start = self.start(node) if node is not None else None
        return "" if start is None else self.at(start)

    def at(self, start: int) -> str:
        """' (line L, column C)' of the character at offset `start`."""
        line = self.sql.count("\n", 0, start) + 1
        return f" (line {line}, column {start - self.sql.rfind(chr(10), 0, start)})"

    def start(self, node: exp.Expr) -> int | None:
        """Where the node's text starts (`_first`); for a node with no located token
        (`current_date`), its name's one token, else where its parent starts."""
        first = self._first(node)
        if first is not None:
            return first
        if isinstance(node, exp.Func):
            named = [t for t in self.tokens() if t.text.upper() == node.sql_name()]
            if len(named) == 1:
                return named[0].start
        parent = node.parent
        if parent is None or isinstance(parent, exp.Query | exp.Alias):
            return None  # an alias's located token is its name, after the value
        return self.start(parent)

    def _first(self, node: exp.Expr) -> int | None:
        """The node's first located token, or the name of the call it is before it
        (`chr` of `chr(65)`, `SOME` of `= SOME(SELECT ...)`)."""
        own = [node.meta["start"]] if "start" in node.meta else []
        inner = [self._first(child) for child in node.iter_expressions()]
        starts = own + [s for s in inner if s is not None]
        if not starts:
            return None
        if isinstance(node, exp.Paren | exp.Subquery | exp.Tuple):  # its `(` is its start
            before = self._before(min(starts))
            return (
                before.start if before and before.token_type is TokenType.L_PAREN else (min(starts))
            )
        name = self._call_name(node, min(starts))
        return name.start if name is not None else min(starts)

    def _before(self, first: int) -> Token | None:
        """The token before the one at `first`."""
        at = bisect.bisect_right(self.tokens(), first, key=lambda t: t.start) - 2
        return self.tokens()[at] if at >= 0 else None

    def written(self, node: exp.Expr) -> tuple[str, str] | None:
        """The node as the user wrote it, and how: ("token", its own token: a function's
        name, a string), ("call", the name of the call it is) or ("operator", the text
        between its operands)."""
        if "start" in node.meta:
            return self.sql[node.meta["start"] : node.meta["end"] + 1], "token"
        inner = [self._first(child) for child in node.iter_expressions()]
        starts = [s for s in inner if s is not None]
        name = self._call_name(node, min(starts)) if starts else None
        if name is not None:
            return name.text, "call"
        this, other = node.args.get("this"), node.args.get("expression")
        if isinstance(this, exp.Expr) and isinstance(other, exp.Expr):
            ends = [p.meta["end"] for p in this.walk() if "end" in p.meta]
            begins = [p.meta["start"] for p in other.walk() if "start" in p.meta]
            if ends and begins and max(ends) < min(begins):
                between = " ".join(self.sql[max(ends) + 1 : min(begins)].split()).strip("() ")
                if between and len(between) <= 20 and not set(between) & set("(),'\""):
                    return between, "operator"
        return None

    def _call_name(self, node: exp.Expr, first: int) -> Token | None:
        """The name before the `(` that opens the call `node` is, its first located
        token at `first`: `chr` of `chr(65)`, `SOME` of `= SOME(SELECT ...)`."""
        if not isinstance(node, exp.Func | exp.SubqueryPredicate) or "start" in node.meta:
            return None
        tokens = self.tokens()
        at = bisect.bisect_right(tokens, first, key=lambda t: t.start) - 2  # the one before
        while at > 0 and tokens[at].token_type in (TokenType.SELECT, TokenType.WITH):
            at -= 1
        opening = TokenType.L_BRACKET if isinstance(node, exp.Array) else TokenType.L_PAREN
        if at <= 0 or tokens[at].token_type is not opening:
            return None
        name = tokens[at - 1]
        if not re.fullmatch(_NAME, name.text):
            return None
        if isinstance(node, exp.Func) and not isinstance(node, exp.Anonymous):
            # `lower(x::text)`: the `(` is lower's, not the cast's
            return name if name.text.upper() in node.sql_names() else None
        return name

    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = Dialect.get_or_raise(READ_DIALECT).tokenize(self.sql)
        return self._tokens


_NAME = r"[A-Za-z_][A-Za-z0-9_$]*"
_MISSING = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+'>")  # sqlglot's


def parse_select(text: SqlText) -> exp.Query:
    """The one SELECT the text holds, or a rejection."""
    try:
        statements = [s for s in sqlglot.parse(text.sql, read=READ_DIALECT) if s is not None]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        where = f" (line {first['line']}, column {first['col']})" if "line" in first else ""
        reason = str(first.get("description", error)).split(". Line")[0]
        reason = _MISSING.sub("an operand or argument is missing", reason)
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
        if not is_allowed(node) or _called_if(node):
            raise text.reject(f"{describe(text, node)} is not allowed", node)
        unsupported = _unsupported_form(node)
        if unsupported is not None:
            raise text.reject(f"{unsupported} is not supported", node)
        twice = _named_twice(node)
        if twice is not None:
            what = "CTEs" if isinstance(twice, exp.CTE) else "tables"
            raise text.reject(
                f"two {what} are named '{twice.alias_or_name}': give each its own name", twice
            )
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise text.reject("WITH RECURSIVE is not allowed", node)
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier):  # FROM generate_series(...)
                raise text.reject(f"{describe(text, node.this)} is not allowed", node)
            name = _table_name(node)
            if name not in inputs and name not in ctes:
                known = ", ".join(sorted(inputs)) or "none"
                raise text.reject(f"no input named '{name}' (inputs: {known})", node)


def describe(text: SqlText, node: exp.Expr) -> str:
    """The node as the user wrote it (never sqlglot's name for its class where the SQL
    shows another): `the function LPAD`, `the operator ~*`, `E'a'`."""
    if isinstance(node, exp.TableColumn):
        return f"the table '{node.name}' used as a value"
    if type(node) in _WORDS:
        return _WORDS[type(node)]
    if isinstance(node, exp.Lock):
        return "FOR UPDATE" if node.args.get("update") else "FOR SHARE"
    found = text.written(node)
    if found is None:  # no token of its own: a keyword, else as sqlglot writes it back
        if isinstance(node, exp.Func):
            return f"the function {node.sql_name()}"
        keywords = Dialect.get_or_raise(READ_DIALECT).tokenizer_class.KEYWORDS
        return node.key.upper() if node.key.upper() in keywords else f"`{node.sql()[:40]}`"
    written, how = found
    if how == "operator":
        words = re.fullmatch(r"[A-Za-z ]+", written)
        return written.upper() if words else f"the operator {written}"
    if not re.fullmatch(_NAME, written):
        return f"`{written[:40]}`"  # a string of a kind not allowed: E'...', X'...'
    return f"the function {written.upper()}" if isinstance(node, exp.Func) else written.upper()


# Nodes the SQL names in words of its own, not by a token of theirs.
_WORDS: dict[type[exp.Expr], str] = {
    exp.Tuple: "a row value such as (a, b)",
    exp.Dot: "a field of a composite value, as in (x).f",
    exp.Bracket: "a subscript, as in x[1]",
    exp.Into: "SELECT ... INTO",
    exp.GroupingSets: "GROUPING SETS",
    exp.WithinGroup: "WITHIN GROUP",
    exp.IgnoreNulls: "IGNORE NULLS",
    exp.RespectNulls: "RESPECT NULLS",
    exp.Kwarg: "a named argument (=>)",
    exp.Parameter: "a parameter",
    exp.Placeholder: "a parameter",
    exp.ObjectIdentifier: "an object identifier type (regclass, oid, ...)",
    exp.AtTimeZone: "AT TIME ZONE",
    exp.IntDiv: "the function DIV",
    exp.JSONExtract: "the operator -> (or #>)",
    exp.JSONExtractScalar: "the operator ->> (or #>>)",
    exp.JSONBExtract: "the operator #>",
    exp.JSONBExtractScalar: "the operator #>>",
}


def _named_twice(node: exp.Expr) -> exp.Expr | None:
    """The second table of one FROM (or CTE of one WITH) with a name taken before it,
    which PostgreSQL refuses (qualify would rename it `s_2`)."""
    tables: list[exp.Expr]
    if isinstance(node, exp.Select) and node.args.get("from_") is not None:
        tables = [node.args["from_"].this, *(j.this for j in node.args.get("joins") or ())]
    elif isinstance(node, exp.With):
        tables = list(node.expressions)
    else:
        return None
    seen: set[str] = set()
    for table in tables:
        if table.alias_or_name in seen:
            return table
        seen.add(table.alias_or_name)
    return None


def _called_if(node: exp.Expr) -> bool:
    """`IF(c, a, b)`, which is no PostgreSQL function (sqlglot reads a CASE's branches
    as `If` nodes too)."""
    return isinstance(node, exp.If) and not isinstance(node.parent, exp.Case)


def _unsupported_form(node: exp.Expr) -> str | None:
    """A form of an allowed node that the translation does not carry (never dropped
    silently: `DISTINCT ON` would pick other rows, `NATURAL JOIN` join on the physical
    columns)."""
    if isinstance(node, exp.Distinct) and node.args.get("on") is not None:
        return "DISTINCT ON"
    if isinstance(node, exp.Group) and node.args.get("all") is not None:
        return "GROUP BY ALL" if node.args["all"] else "GROUP BY DISTINCT"
    if isinstance(node, exp.SetOperation) and (
        node.args.get("by_name") or node.args.get("side") or node.args.get("kind")
    ):
        return f"{node.key.upper()} CORRESPONDING"
    if isinstance(node, exp.Join):
        if node.args.get("method"):
            return f"{str(node.args['method']).upper()} JOIN"
        kind = str(node.args.get("kind") or "").upper()
        if kind not in _JOIN_KINDS:
            return f"{kind} JOIN"
    if isinstance(node, exp.Table) and node.args.get("only"):  # SQLite has no ONLY
        return "FROM ONLY"
    if isinstance(node, exp.TableAlias) and node.columns and isinstance(node.parent, exp.Table):
        return f"naming the columns of an input, as in {node.parent.name} AS {node.name}(a, b),"
    return None


_JOIN_KINDS = ("", "INNER", "OUTER", "CROSS")


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


def mark_unnamed(tree: exp.Query) -> None:
    """Each computed column without a name (`s.a + 1`, not `s.a::text`, which is `a`)
    before `qualify` names it `_col_0`: a subquery's or a CTE's may not be read by name
    (`_check_unnamed_reads`)."""
    for select in tree.find_all(exp.Select):
        listed = _listed_names(select)
        for position, projection in enumerate(select.expressions, start=1):
            if (
                position > listed
                and not projection.output_name
                and not isinstance(projection, exp.Star)
            ):
                projection.meta[UNNAMED] = position


def _listed_names(select: exp.Select) -> int:
    """How many of the select's columns the list after its subquery's or CTE's name
    names: `(SELECT ...) AS c (k, n)`, `WITH c (k, n) AS (...)`."""
    node: exp.Expr = select
    while isinstance(node.parent, exp.SetOperation):
        node = node.parent
    alias = (
        node.parent.args.get("alias") if isinstance(node.parent, exp.Subquery | exp.CTE) else None
    )
    return len(alias.columns) if isinstance(alias, exp.TableAlias) else 0


UNNAMED = "tally_unnamed"  # a computed column's position in its SELECT, where it has no name


def _check_unnamed_reads(text: SqlText, tree: exp.Query) -> None:
    """A column of a subquery in FROM or of a CTE read by name (or by `*`) must have a
    name of its own: sqlglot's `_col_0` is no name the user wrote (PostgreSQL's
    `?column?` neither)."""
    for scope in traverse_scope(tree):
        for column in scope.columns:
            source = scope.sources.get(column.table)
            if not isinstance(source, Scope):
                continue
            select = _leftmost(source.expression)
            for projection in select.expressions:
                position = projection.this.meta.get(UNNAMED) if projection.this else None
                if projection.alias_or_name == column.name and position is not None:
                    what = "the CTE" if source.is_cte else "the subquery"
                    raise text.reject(
                        f"column {position} of {what} '{column.table}' is read but has no "
                        f"name: write `{projection.this.sql(READ_DIALECT)} AS name`",
                        projection.this,
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
        if not is_allowed(node):
            raise text.reject(f"{describe(text, node)} is not allowed", node)
    _check_unnamed_reads(text, result)
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

_USING = re.compile(r"Cannot automatically join: (?P<name>.*)")
_UNKNOWN_TABLE = re.compile(r"Unknown table: (?P<name>.*)")
_UNKNOWN_OUTPUT = re.compile(r"Unknown output column: (?P<n>.*)")


def _column_problem(
    text: SqlText, message: str, tree: exp.Query, inputs: Mapping[str, Input]
) -> str:
    joined = _USING.search(message)
    if joined is not None:
        name = joined.group("name")
        used = [
            i for j in tree.find_all(exp.Join) for i in j.args.get("using") or () if i.name == name
        ]
        return f"USING ({name}): both sides of the join need a column '{name}'" + (
            text.where(used[0]) if used else ""
        )
    table = _UNKNOWN_TABLE.search(message)
    if table is not None:
        name = table.group("name")
        reading = [c for c in tree.find_all(exp.Column) if c.table == name]
        return f"no table named '{name}' in this query" + (
            text.where(reading[0]) if reading else ""
        )
    output = _UNKNOWN_OUTPUT.search(message)
    if output is not None:
        return f"there is no output column {output.group('n')} (ORDER BY and GROUP BY count from 1)"
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
