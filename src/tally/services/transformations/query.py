"""A transformation's SQL checked against its inputs (`check_sql`): its output columns,
and the statement each backend runs over the inputs' tables."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from tally.core.columns import Column, ColumnType
from tally.core.errors import DefinitionRejectedError
from tally.core.sql_limits import DEFAULT_SQL_LIMITS, SqlLimits
from tally.services.transformations.dialect import (
    Input,
    SqlText,
    check_nodes,
    check_output_names,
    mark_unnamed,
    parse_select,
    qualified,
)
from tally.services.transformations.limits import (
    check_deadline,
    check_expansion,
    check_text,
    check_tree,
)
from tally.services.transformations.translate import CHECKING_DATE, Translator
from tally.storage.resource_tables.ddl import ROW_ID
from tally.storage.sql_forms import checking_forms
from tally.storage.sql_forms.forms import Forms


@dataclass(frozen=True)
class OutputColumn:
    name: str
    type: ColumnType
    scale: int = 0
    timezone: bool = False


@dataclass(frozen=True)
class CheckedQuery:
    """One SELECT that reads only its inputs, every output typed. `statement` returns
    the SELECT, written in the forms storage picked for its backend, whose result
    columns are, in order, `columns` in tally's stored form for that backend (what a row
    table of `as_columns()` stores)."""

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

    @property
    def resource_ids(self) -> frozenset[int]:
        return frozenset(i.resource_id for i in self.inputs.values())

    @property
    def is_incremental(self) -> bool:
        """Each output row comes from one input row (filters, computed columns, UNION
        ALL): a run may read only the rows added since the last one and append."""
        if any(isinstance(node, _WHOLE_TABLE) for node in self._tree.walk()):
            return False
        for select in self._tree.find_all(exp.Select):
            source = select.args.get("from_")
            if source is None or not isinstance(source.this, exp.Table):
                return False  # a SELECT of constants would repeat its rows each run
        return not any(
            isinstance(node, exp.SetOperation) and node.args.get("distinct")
            for node in self._tree.walk()
        )

    @property
    def reads_current_date(self) -> bool:
        """Its rows depend on the date too: a run passes it (`today`), and a new date
        needs a new run (services/transformations/runs.py)."""
        return self._tree.find(exp.CurrentDate) is not None

    def statement(
        self,
        forms: Forms,
        *,
        after_row_ids: Mapping[int, int] | None = None,
        today: dt.date | None = None,
    ) -> str:
        """`after_row_ids` (resource id -> row id) reads only later rows of those inputs,
        for an incremental query; `today` is CURRENT_DATE (the run's or the preview's
        UTC date, taken once when it starts: both backends read the same), required
        when the query reads it."""
        if today is None:
            if self.reads_current_date:
                raise ValueError("the query reads CURRENT_DATE: pass `today`")
            today = CHECKING_DATE
        text = SqlText(self.sql)
        tree = self._tree.copy()
        try:
            Translator(text, self.inputs, forms, today).translate(tree)
            if after_row_ids:
                if not self.is_incremental:
                    raise ValueError("only an incremental query reads the new rows alone")
                _read_after(tree, after_row_ids)
            return tree.sql(dialect=forms.dialect, identify=True)  # an alias may be a keyword
        except RecursionError:  # the limits keep within Python's
            raise _too_deep(text) from None


# What makes an output row depend on more than one input row, or on rows' order.
_WHOLE_TABLE = (
    exp.AggFunc,
    exp.Window,
    exp.Distinct,
    exp.Join,
    exp.Group,
    exp.Having,
    exp.Order,
    exp.Limit,
    exp.Offset,
    exp.With,
    exp.Subquery,
    exp.Exists,
)


def _read_after(tree: exp.Query, after_row_ids: Mapping[int, int]) -> None:
    """`alias._row_id > n` added to each SELECT reading an input's table `r_<id>`."""
    for select in tree.find_all(exp.Select):
        source = select.args["from_"].this
        resource_id = int(source.name.removeprefix("r_"))
        if resource_id in after_row_ids:
            newer = exp.GT(
                this=exp.column(ROW_ID, table=source.alias_or_name),
                expression=exp.Literal.number(after_row_ids[resource_id]),
            )
            select.where(newer, copy=False)


def check_sql(
    sql: str,
    inputs: Mapping[str, Input],
    limits: SqlLimits = DEFAULT_SQL_LIMITS,
    *,
    deadline: float | None = None,
) -> CheckedQuery:
    """Raises DefinitionRejectedError (field "sql") naming the line and column, or the
    name, at fault, or the limit passed (limits.py), measured before each step that
    grows with the SQL; past `deadline` (a `time.monotonic()`: the time limit of the run
    or preview the check is part of) between steps."""
    text = SqlText(sql)
    try:
        check_text(text, limits)
        tree = parse_select(text)
        check_tree(text, tree, limits)
        check_nodes(text, tree, inputs)
        check_output_names(text, tree)
        mark_unnamed(tree)
        check_expansion(text, tree, inputs, limits)
        check_deadline(text, deadline)
        tree = qualified(text, tree, inputs)
        check_tree(text, tree, limits, qualified=True)
        check_deadline(text, deadline)
        outputs = Translator(text, inputs, checking_forms()).translate(tree.copy())
        check_deadline(text, deadline)
    except RecursionError:  # the limits keep sqlglot's recursion within Python's
        raise _too_deep(text) from None
    columns = tuple(
        OutputColumn(name, kind.kind or ColumnType.TEXT, kind.scale, kind.timezone)
        for name, kind in outputs
    )
    return CheckedQuery(sql, dict(inputs), columns, tree)


def _too_deep(text: SqlText) -> DefinitionRejectedError:
    return text.reject(
        "the SQL nests too deeply to be read: nest fewer parentheses, CASEs and subqueries "
        "(TALLY_TRANSFORMATION_MAX_NESTING, TALLY_TRANSFORMATION_MAX_DEPTH)"
    )
