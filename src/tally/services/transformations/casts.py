"""The typed-node plumbing the expression rules share: reading and setting a node's
type, converting a value to another type (a larger scale, a stated one, text, ...) and
CAST and TRY_CAST (text read as a number or a date: storage/sql_conversions.py), with
the rejections these raise."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot import exp

from tally.core.columns import ColumnType, canonical_timestamp
from tally.core.errors import DefinitionRejectedError
from tally.core.sql_types import (
    BOOLEAN,
    DATE,
    INTEGER,
    MAX_SCALE,
    NULL,
    TEXT,
    SqlType,
    decimal_of,
    timestamp_of,
    unify,
)
from tally.services.transformations.dialect import SqlText
from tally.storage.resource_tables.ddl import ROW_ID
from tally.storage.sql_conversions import (
    DECIMAL_NUMBER,
    ISO_DATE,
    WHOLE_NUMBER,
    ConversionError,
    NumberFormat,
    failure,
)
from tally.storage.sql_forms.forms import POSITION_KEYS, Forms

TYPE = "tally_type"
QUOTIENT = "tally_quotient"
INTERVAL = "tally_interval"  # (seconds, unit) of an INTERVAL literal
PARSED = "tally_parsed"  # a parse_decimal waiting for its scale
ROW_OF = "tally_row_of"  # a column's: (alias, input name) of the input table it reads
_INTEGER_TYPES = {exp.DType.BIGINT, exp.DType.INT, exp.DType.SMALLINT}
_DECIMAL_TYPES = {exp.DType.DECIMAL}
_TEMPORAL = (ColumnType.DATE, ColumnType.TIMESTAMP)
_SIMPLE_TYPES = {
    exp.DType.TEXT: TEXT,
    exp.DType.VARCHAR: TEXT,
    exp.DType.DATE: DATE,
    exp.DType.BOOLEAN: BOOLEAN,
    exp.DType.TIMESTAMP: timestamp_of(timezone=False),
    exp.DType.TIMESTAMPTZ: timestamp_of(timezone=True),
}


@dataclass(frozen=True)
class Quotient:
    """A division waiting for its scale."""

    num: exp.Expr
    num_type: SqlType
    den: exp.Expr
    den_type: SqlType
    avg: bool = False


@dataclass(frozen=True)
class Parsed:
    """A parse_decimal waiting for its scale: the text, its format, where it is."""

    text: exp.Expr
    number: NumberFormat
    context: exp.Expr


class Casts:
    def __init__(self, text: SqlText, forms: Forms) -> None:
        self.text = text
        self.forms = forms

    def set(self, node: exp.Expr, new: exp.Expr, kind: SqlType) -> exp.Expr:
        """`new` (the node itself, or its rewrite, which takes its place) is of `kind`."""
        new.meta[TYPE] = kind
        if new is not node:
            for key in POSITION_KEYS:  # a rewritten literal still names its place
                if key in node.meta and key not in new.meta:
                    new.meta[key] = node.meta[key]
            node.replace(new)
        return new

    def kind(self, node: exp.Expr) -> SqlType:
        """The node's type; a division whose scale is not stated is rejected here."""
        quotient = node.meta.get(QUOTIENT)
        if quotient is not None:
            raise self.unscaled(node, avg=quotient.avg)
        if PARSED in node.meta:
            raise self.text.reject(
                "parse_decimal must state its scale, as in "
                f"CAST(parse_decimal(x, ',', '.') AS DECIMAL(18, 2)){_output_named(node)}",
                node,
            )
        kind: SqlType = node.meta.get(TYPE, NULL)
        return kind

    def expect(self, node: exp.Expr, what: str, test: Callable[[SqlType], bool]) -> SqlType:
        kind = self.kind(node)
        if not (kind.is_null or test(kind)):
            raise self.text.reject(f"expected {what}, found {kind.describe()}", node)
        return kind

    def unify_or_reject(self, left: SqlType, right: SqlType, at: exp.Expr) -> SqlType:
        common = unify(left, right)
        if common is None:
            raise self.text.reject(
                f"{left.describe()} and {right.describe()} cannot be compared or combined", at
            )
        return common

    def convert(self, node: exp.Expr, target: SqlType) -> exp.Expr:
        """The node as a value of `target`, which `unify` chose for it (a number at a
        larger scale on SQLite; anything else is already of that type)."""
        kind = self.kind(node)
        if kind.is_numeric and target.is_numeric and target.scale > kind.scale:
            rescaled = self.forms.rescale(node, target.scale - kind.scale)
            return self.set(node, rescaled, target)
        return node

    def to_scale(
        self, node: exp.Expr, target: SqlType, where: str, *, safe: bool = False
    ) -> exp.Expr:
        """A number (or a division, or a parse_decimal) at the target scale, rounded half
        away from zero; `safe` (TRY_CAST): a text that does not convert is NULL."""
        parsed = node.meta.get(PARSED)
        if parsed is not None:
            scale = target.scale
            self.literal_fits(parsed.text, lambda v: parsed.number.read(v, scale), "parse_decimal")
            context = None if safe else parsed.context
            return self.forms.text_to_number(parsed.text, scale, parsed.number, context)
        quotient = node.meta.get(QUOTIENT)
        if quotient is not None:
            return self.forms.quotient(
                quotient.num.copy(),
                quotient.num_type.scale,
                quotient.den.copy(),
                quotient.den_type.scale,
                target.scale,
            )
        kind = self.kind(node)
        if kind.is_null:
            return self.forms.typed_null(target)
        if not kind.is_numeric:
            raise self.text.reject(f"{where} needs a number, found {kind.describe()}", node)
        if kind.scale > target.scale:
            return self.forms.reduce_scale(node, scale=kind.scale, to=target.scale)
        return self.forms.rescale(node, target.scale - kind.scale)

    def unscaled(self, node: exp.Expr, *, avg: bool) -> DefinitionRejectedError:
        what = "AVG" if avg else "a division"
        example = "ROUND(AVG(x), 2)" if avg else "ROUND(a / b, 2) or CAST(a / b AS DECIMAL(18, 4))"
        return self.text.reject(
            f"{what} must state its scale, as in {example}{_output_named(node)}", node
        )

    def common(self, nodes: Sequence[exp.Expr], at: exp.Expr) -> SqlType:
        """The type the nodes share (text literals read as the dates or timestamps they
        meet), each node converted to it; rejected when there is none."""
        kinds = [self.kind(n) for n in nodes]
        meeting = next((k for k in kinds if temporal(k)), None)
        if meeting is not None:
            nodes = [
                self.temporal_literal(n, meeting)
                if k.kind is ColumnType.TEXT and isinstance(n, exp.Literal)
                else n
                for n, k in zip(nodes, kinds, strict=True)
            ]
            kinds = [self.kind(n) for n in nodes]
        common = NULL
        for kind in kinds:
            common = self.unify_or_reject(common, kind, at)
        for node in nodes:
            self.convert(node, common)
        return common

    def ordered(self, node: exp.Expr, kind: SqlType) -> None:
        if kind.kind in (ColumnType.TEXT, ColumnType.DATE):
            self.set(node, self.forms.ordered_text(node), kind)

    def context(self, node: exp.Expr, what: str, operand: exp.Expr) -> exp.Expr:
        """Where a conversion is, as its failure names it: `CAST to integer at line 1,
        column 8`, and `; row 12 of s` (the input row's id) where the operand reads one
        input table of the conversion's own query, row by row (`_per_row`)."""
        where = self.text.where(node).strip(" ()")
        said = exp.Literal.string(f"{what} at {where}" if where else what)
        tables: set[tuple[str, str] | None] = {
            c.meta.get(ROW_OF) for c in operand.find_all(exp.Column)
        }
        table = tables.pop() if len(tables) == 1 else None
        if table is None or not _per_row(node):
            return said
        alias, name = table
        row = exp.Cast(
            this=exp.column(ROW_ID, table=alias, quoted=True), to=exp.DataType.build("text")
        )
        tail = exp.Literal.string(f" of {name}")
        return exp.Paren(
            this=exp.DPipe(
                this=exp.DPipe(this=said, expression=exp.Literal.string("; row ")),
                expression=exp.DPipe(this=row, expression=tail),
            )
        )

    def literal_fits(self, node: exp.Expr, read: Callable[[str], object], what: str) -> None:
        """A quoted text that will not convert is refused here, on both backends (rather
        than fail every run, or only PostgreSQL's plan)."""
        if isinstance(node, exp.Literal) and node.is_string:
            try:
                read(node.this)
            except ConversionError as error:
                raise self.text.reject(failure(node.this, str(error), what), node) from None

    def under_try(self, node: exp.Expr) -> bool:
        """Whether the node is the operand of a TRY_CAST (in parentheses or not)."""
        parent = node.parent
        while isinstance(parent, exp.Paren):
            node, parent = parent, parent.parent
        return isinstance(parent, exp.TryCast) and parent.this is node

    def _cast(self, node: exp.Expr) -> None:
        target = self._target(node)
        safe = isinstance(node, exp.TryCast)
        inner = node.this
        temporal_text = isinstance(inner, exp.Literal) and inner.is_string
        if temporal_text and target.kind in _TEMPORAL and not (safe and target == DATE):
            inner = self.temporal_literal(inner, target)  # CAST('2024-01-31' AS DATE)
        numeric_inner = QUOTIENT in inner.meta or PARSED in inner.meta
        if target.is_numeric and (numeric_inner or self.kind(inner).is_numeric):
            self.set(node, self.to_scale(inner, target, "CAST", safe=safe), target)
            return
        kind = self.kind(inner)
        if kind.kind is ColumnType.TEXT and (target.is_numeric or target == DATE):
            self.set(node, self._from_text(node, inner, target, safe=safe), target)
            return
        if kind.is_null:
            self.set(node, self.forms.typed_null(target), target)
        elif kind == target:
            self.set(node, inner, target)
        elif target.kind is ColumnType.TEXT:
            self.set(node, self.forms.to_text(inner, kind), TEXT)
        elif kind.kind is ColumnType.BOOLEAN and target.kind is ColumnType.INTEGER:
            self.set(node, self.forms.bool_to_int(inner), INTEGER)
        elif kind.kind is ColumnType.INTEGER and target.kind is ColumnType.BOOLEAN:
            self.set(node, self.forms.int_to_bool(inner), BOOLEAN)
        elif kind.kind is ColumnType.DATE and target == timestamp_of(timezone=False):
            self.set(node, self.forms.date_to_timestamp(inner), target)
        elif kind.kind is ColumnType.TIMESTAMP and target.kind is ColumnType.DATE:
            self.set(node, self.forms.timestamp_to_date(inner), DATE)
        else:
            raise self.text.reject(
                f"CAST from {kind.describe()} to {target.describe()} is not supported", node
            )

    def _from_text(
        self, node: exp.Expr, inner: exp.Expr, target: SqlType, *, safe: bool
    ) -> exp.Expr:
        """CAST of a text to a number (a whole one for an integer type, a decimal one
        for DECIMAL(p, s)) or an ISO date (storage/sql_conversions.py)."""
        what = f"CAST to {target.describe()}"
        context = self.context(node, what, inner)
        if target == DATE:
            self.literal_fits(inner, ISO_DATE.read, what)
            return self.forms.text_to_date(inner, ISO_DATE, None if safe else context)
        decimal = node.args["to"].this in _DECIMAL_TYPES
        number = DECIMAL_NUMBER if decimal else WHOLE_NUMBER
        self.literal_fits(inner, lambda v: number.read(v, target.scale), what)
        return self.forms.text_to_number(inner, target.scale, number, None if safe else context)

    def temporal_literal(self, node: exp.Literal, kind: SqlType) -> exp.Expr:
        try:
            canonical, aware = canonical_timestamp(node.this)
        except ValueError:
            canonical, aware = "", False
        if kind.kind is ColumnType.DATE:
            if canonical != f"{node.this}T00:00:00":
                raise self.text.reject(f"'{node.this}' is not a date (YYYY-MM-DD)", node)
            return self.set(node, node, DATE)
        if not canonical or (aware and not kind.timezone):
            raise self.text.reject(f"'{node.this}' is not a timestamp of this column", node)
        literal = self.forms.timestamp_literal(canonical, timezone=kind.timezone)
        return self.set(node, literal, kind)

    def _target(self, node: exp.Expr) -> SqlType:
        to = node.args["to"]
        params = [p.this for p in to.expressions]
        if to.this in _DECIMAL_TYPES:
            if len(params) != 2 or not all(isinstance(p, exp.Literal) for p in params):
                raise self.text.reject("DECIMAL needs a scale, as in DECIMAL(18, 2)", node)
            scale = int(params[1].this)
            if scale > MAX_SCALE:
                raise self.text.reject(f"a DECIMAL's scale must be at most {MAX_SCALE}", node)
            return decimal_of(scale)
        if to.this in _INTEGER_TYPES and not params:
            return INTEGER
        if to.this in _SIMPLE_TYPES and not params:
            return _SIMPLE_TYPES[to.this]
        raise self.text.reject(f"CAST to {to.sql('postgres')} is not supported", node)


def _per_row(node: exp.Expr) -> bool:
    """Whether the node is computed once per row of its query's tables (where their
    other columns may be read): inside an aggregate's argument, or in a query without
    grouping, aggregates, or (in its ORDER BY) DISTINCT. (A window function's argument
    is computed over its query's rows: per row unless the query is grouped.)"""
    current = node
    while current.parent is not None and not isinstance(current, exp.Select):
        if isinstance(current, exp.AggFunc) and not isinstance(current.parent, exp.Window):
            return True
        if isinstance(current, exp.Order) and current.parent.args.get("distinct"):
            return False
        current = current.parent
    if not isinstance(current, exp.Select):
        return False
    if any(current.args.get(k) for k in ("group", "having")):
        return False
    for projection in current.expressions:
        for aggregate in projection.find_all(exp.AggFunc):
            if not isinstance(aggregate.find_ancestor(exp.Window, exp.Select), exp.Window):
                return False  # an aggregate of the whole query: it is grouped
    return True


def _output_named(node: exp.Expr) -> str:
    """': output column NAME' for a node inside a select's output list."""
    current: exp.Expr | None = node
    while current is not None and current.parent is not None:
        if current.arg_key == "expressions" and isinstance(current.parent, exp.Select):
            return f" (output column '{current.alias_or_name}')"
        current = current.parent
    return ""


def numeric(kind: SqlType) -> bool:
    return kind.is_numeric


def textual(kind: SqlType) -> bool:
    return kind.kind is ColumnType.TEXT


def temporal(kind: SqlType) -> bool:
    return kind.kind in (ColumnType.DATE, ColumnType.TIMESTAMP)
