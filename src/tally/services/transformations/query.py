"""A transformation's SQL checked against its inputs (`check_sql`): its output columns,
and the statement each backend runs over the inputs' tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from tally.core.columns import Column, ColumnType
from tally.services.transformations.dialect import (
    Input,
    SqlText,
    check_nodes,
    check_output_names,
    parse_select,
    qualified,
)
from tally.services.transformations.forms import Forms
from tally.services.transformations.postgres_forms import PostgresForms
from tally.services.transformations.sqlite_forms import SqliteForms
from tally.services.transformations.translate import Translator


@dataclass(frozen=True)
class OutputColumn:
    name: str
    type: ColumnType
    scale: int = 0
    timezone: bool = False


@dataclass(frozen=True)
class CheckedQuery:
    """One SELECT that reads only its inputs, every output typed. `backend_sql` returns
    the statement whose result columns are, in order, `columns` in tally's stored form
    for that backend (what a row table of `as_columns()` stores)."""

    sql: str
    inputs: Mapping[str, Input]
    columns: tuple[OutputColumn, ...]
    _tree: exp.Query = field(repr=False, compare=False)

    def as_columns(self) -> tuple[Column, ...]:
        """The output as a resource's columns, physical names c0..cN."""
        return tuple(
            Column(c.name, f"c{i}", c.type, scale=c.scale, timezone=c.timezone)
            for i, c in enumerate(self.columns)
        )

    def backend_sql(self, *, postgresql: bool) -> str:
        forms: Forms = PostgresForms() if postgresql else SqliteForms()
        tree = self._tree.copy()
        Translator(SqlText(self.sql), self.inputs, forms).translate(tree)
        return tree.sql(dialect=forms.dialect)


def check_sql(sql: str, inputs: Mapping[str, Input]) -> CheckedQuery:
    """Raises DefinitionRejectedError (field "sql") naming the line and column, or the
    name, at fault."""
    text = SqlText(sql)
    tree = parse_select(text)
    check_nodes(text, tree, inputs)
    check_output_names(text, tree)
    tree = qualified(text, tree, inputs)
    outputs = Translator(text, inputs, SqliteForms()).translate(tree.copy())
    columns = tuple(
        OutputColumn(name, kind.kind or ColumnType.TEXT, kind.scale, kind.timezone)
        for name, kind in outputs
    )
    return CheckedQuery(sql, dict(inputs), columns, tree)
