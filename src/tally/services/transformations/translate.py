"""Types every expression of a qualified query and rewrites it for one backend, scope by
scope (CTEs and subqueries before the queries that read them): columns become the
inputs' physical columns, tables `r_<id>`, and each typed operation its backend's form
(`forms`). Raises the rejections only types can tell (a division without a scale, a
comparison of text with a number, ...)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope, walk_in_scope

from tally.core.columns import ColumnType
from tally.core.sql_types import TEXT, SqlType, of_column, unify
from tally.services.transformations.casts import ROW_OF, TYPE
from tally.services.transformations.dialect import Input, SqlText
from tally.services.transformations.expressions import ExpressionRules
from tally.storage.sql_forms.forms import Forms

Output = tuple[str, SqlType]
CHECKING_DATE = dt.date(2000, 1, 1)  # CURRENT_DATE where a check only types the query
RENAMED = "tally_renamed"
_NOT_A_VALUE = (exp.From, exp.Join, exp.In)  # where a subquery is a table or a list


class Translator:
    """One translation of one query for one backend (`forms`); not reusable."""

    def __init__(
        self,
        text: SqlText,
        inputs: Mapping[str, Input],
        forms: Forms,
        today: dt.date = CHECKING_DATE,
    ) -> None:
        self.text = text
        self.inputs = inputs
        self.forms = forms
        self.today = today.isoformat()  # CURRENT_DATE
        self.outputs: dict[int, list[Output]] = {}
        self._ordered_outputs: dict[int, list[str | None]] = {}  # ORDER BY's, by select
        self.rules = ExpressionRules(text, forms, self)

    def translate(self, tree: exp.Query) -> list[Output]:
        """Rewrites `tree` in place; the output columns' names and types."""
        scopes = traverse_scope(tree)
        for scope in scopes:
            if isinstance(scope.expression, exp.SetOperation):
                self._set_operation(scope.expression)
            elif isinstance(scope.expression, exp.Select):
                self._select(scope)
        for scope in scopes:  # after every column is bound: a subquery sees outer tables
            self._rename_tables(scope)
        outputs = [(name, TEXT if kind.is_null else kind) for name, kind in self.outputs_of(tree)]
        self._store(tree, outputs)
        return outputs

    def outputs_of(self, query: exp.Expr) -> list[Output]:
        return self.outputs[id(query.unnest())]

    def _select(self, scope: Scope) -> None:
        select = scope.expression
        order = select.args.get("order")
        if order is not None:  # as written: translated, two conversions name their places
            self._ordered_outputs[id(select)] = [
                next((p.alias_or_name for p in select.expressions if p.this == o.this), None)
                for o in order.expressions
            ]
        nodes = list(walk_in_scope(select))
        in_order = {id(n) for n in order.walk()} if order is not None else set()
        # ORDER BY may name the select's own outputs: it is typed after them.
        for node in [n for n in reversed(nodes) if id(n) not in in_order]:
            self._visit(node, scope)
        for node in [n for n in reversed(nodes) if id(n) in in_order]:
            self._visit(node, scope)
        clauses = [select.args.get("where"), select.args.get("having")]
        conditions = [clause.this for clause in clauses if clause is not None]
        conditions += [
            join.args["on"] for join in select.args.get("joins") or [] if join.args.get("on")
        ]
        for condition in conditions:
            self.rules.expect(condition, "a condition", lambda k: k.kind is ColumnType.BOOLEAN)
        self.outputs[id(select)] = [
            (p.alias_or_name, self.rules.kind(p)) for p in select.expressions
        ]

    def _visit(self, node: exp.Expr, scope: Scope) -> None:
        if node is scope.expression or isinstance(node, exp.Query | exp.CTE):
            if isinstance(node, exp.Subquery) and not isinstance(node.parent, _NOT_A_VALUE):
                self.rules.scalar_subquery(node, self.outputs_of(node))
            return
        if isinstance(node, exp.Column):
            self._column(node, scope)
        else:
            self.rules.visit(node)

    def _column(self, column: exp.Column, scope: Scope) -> None:
        if not column.table:  # ORDER BY naming one of the select's outputs
            named = [p for p in scope.expression.expressions if p.alias_or_name == column.name]
            if not named:  # pragma: no cover - qualify rejected every other bare name
                raise self.text.reject(f"unknown column '{column.name}'", column)
            if isinstance(column.parent, exp.Ordered):
                column.meta[TYPE] = self.rules.kind(named[0])
            else:  # `ORDER BY a + 1`: PostgreSQL reads a bare output name only alone
                self.rules.set(column, named[0].this.copy(), self.rules.kind(named[0]))
            return
        source = _source(scope, column.table)
        if isinstance(source, Scope):
            found = dict(self.outputs_of(source.expression))
            column.meta[TYPE] = found[column.name]
            return
        columns = {c.name: c for c in self.inputs[source.name].columns}
        stored = columns[column.name]
        column.set("this", exp.to_identifier(stored.physical))
        column.meta[TYPE] = of_column(stored)
        if column.table in scope.sources:  # its row, for a conversion's failure
            column.meta[ROW_OF] = (column.table, source.name)

    def _rename_tables(self, scope: Scope) -> None:
        for source in scope.sources.values():
            if (
                isinstance(source, exp.Table)
                and source.name in self.inputs
                and not source.meta.get(RENAMED)
            ):
                source.meta[RENAMED] = True
                table_id = self.inputs[source.name].resource_id
                source.set("this", exp.to_identifier(f"r_{table_id}"))

    def _set_operation(self, node: exp.SetOperation) -> None:
        for clause in (node.args.get("limit"), node.args.get("offset")):
            for part in reversed(list(clause.walk()) if clause is not None else []):
                self.rules.visit(part)  # `... UNION ALL ... LIMIT 2.5`: as a SELECT's
        left, right = self.outputs_of(node.left), self.outputs_of(node.right)
        operation = node.key.upper() + ("" if node.args.get("distinct") else " ALL")
        if len(left) != len(right):
            raise self.text.reject(
                f"the two sides of {operation} have {len(left)} and {len(right)} columns", node
            )
        kinds = []
        for (name, a), (_, b) in zip(left, right, strict=True):
            common = unify(a, b)
            if common is None:
                raise self.text.reject(
                    f"column '{name}' is {a.describe()} on one side of {operation} "
                    f"and {b.describe()} on the other",
                    node,
                )
            kinds.append(common)
        for side in (node.left, node.right):
            self.conform(side, kinds)
        self.outputs[id(node)] = [(name, k) for (name, _), k in zip(left, kinds, strict=True)]

    def conform(self, query: exp.Expr, kinds: list[SqlType]) -> None:
        """Each output of `query` brought to the given type (a larger scale)."""
        query = query.unnest()
        if isinstance(query, exp.SetOperation):
            self.conform(query.left, kinds)
            self.conform(query.right, kinds)
        else:
            for projection, kind in zip(query.expressions, kinds, strict=True):
                self.rules.convert(projection.this, kind)
        self.outputs[id(query)] = [
            (name, kind) for (name, _), kind in zip(self.outputs[id(query)], kinds, strict=True)
        ]

    def _store(self, query: exp.Expr, outputs: list[Output]) -> None:
        """The outermost outputs in their stored forms."""
        query = query.unnest()
        if isinstance(query, exp.SetOperation):
            self._store(query.left, outputs)
            self._store(query.right, outputs)
            return
        order = query.args.get("order")
        names = self._ordered_outputs.get(id(query), [])
        for ordered, name in zip(
            order.expressions if order is not None else (), names, strict=True
        ):
            # ORDER BY an output's expression (DISTINCT requires it to stay one) names it.
            if name is not None:
                ordered.set("this", exp.column(name, quoted=True))
        for projection, (_, kind) in zip(query.expressions, outputs, strict=True):
            inner = projection.this
            inner.replace(self.forms.output(inner.copy(), kind))


def _source(scope: Scope, alias: str) -> exp.Table | Scope:
    """The table or query an alias names, in this scope or an enclosing one (qualify
    rejected every other alias)."""
    current: Scope | None = scope
    while current is not None and alias not in current.sources:
        current = current.parent
    assert current is not None
    found: exp.Table | Scope = current.sources[alias]
    return found
