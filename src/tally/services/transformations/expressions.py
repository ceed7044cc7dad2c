"""The type rule and the rewrite of each allowed expression, applied children first: a
node's children already carry their types (`node.meta[TYPE]`) and their backend's form.
A division (or AVG) carries its operands instead of a type until a ROUND or a CAST to
DECIMAL states its scale; anywhere else it is rejected."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from tally.core.columns import ColumnType
from tally.core.sql_types import (
    BOOLEAN,
    DATE,
    INTEGER,
    MAX_SCALE,
    NULL,
    TEXT,
    SqlType,
    decimal_of,
    unify,
)
from tally.services.transformations.allow_list import INTERVAL_SECONDS
from tally.services.transformations.casts import (
    INTERVAL,
    PARSED,
    QUOTIENT,
    Quotient,
    numeric,
    textual,
)
from tally.services.transformations.dialect import SqlText
from tally.services.transformations.functions import FunctionRules
from tally.storage.sql_forms.forms import Forms, ascii_lower, like_pattern

if TYPE_CHECKING:
    from tally.services.transformations.translate import Translator


class ExpressionRules(FunctionRules):
    """The operators' rules, and the table from node class to rule."""

    def __init__(self, text: SqlText, forms: Forms, translator: Translator) -> None:
        super().__init__(text, forms)
        self.translator = translator
        same: Callable[[exp.Expr], None] = self._same_as_first
        self._rules: dict[type[exp.Expr], Callable[[exp.Expr], object]] = {
            exp.Literal: self._literal,
            exp.Boolean: lambda n: self.set(n, n, BOOLEAN),
            exp.Null: lambda n: self.set(n, n, NULL),
            exp.Paren: self._paren,
            exp.Alias: lambda n: self.set(n, n, self.kind(n.this)),
            exp.Distinct: self._distinct,
            exp.Neg: self._numeric_same,
            exp.Abs: self._numeric_same,
            exp.Interval: self._interval,
            exp.Add: self._add,
            exp.Sub: self._sub,
            exp.Mul: self._mul,
            exp.Div: self._div,
            exp.Avg: self._avg,
            exp.Round: self._round,
            exp.Cast: self._cast,
            exp.TryCast: self._cast,
            exp.StrToDate: self._to_date,
            exp.Anonymous: self._named_function,
            exp.CurrentDate: self._current_date,
            **dict.fromkeys((exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE), self._compare),
            exp.Is: self._is,
            exp.NullSafeEQ: self._distinct_from,
            exp.NullSafeNEQ: self._distinct_from,
            exp.Exists: lambda n: self.set(n, n, BOOLEAN),
            **dict.fromkeys((exp.And, exp.Or, exp.Not), self._logical),
            exp.In: self._in,
            exp.Between: self._between,
            exp.Like: self._like,
            exp.ILike: self._like,
            exp.Escape: self._escape,
            exp.Case: self._case,
            exp.Coalesce: self._coalesce,
            exp.Nullif: self._coalesce,
            exp.Lower: lambda n: self._text_function(n, self.forms.lower),
            exp.Upper: lambda n: self._text_function(n, self.forms.upper),
            exp.Trim: self._trim,
            exp.Substring: self._substring,
            exp.Replace: self._replace,
            exp.Length: self._length,
            exp.Concat: self._concat,
            exp.DPipe: self._dpipe,
            exp.RegexpLike: self._regexp,
            exp.RegexpReplace: self._regexp,
            exp.RegexpSubstr: self._regexp,
            exp.Extract: self._extract,
            exp.TimestampTrunc: self._truncate,
            exp.Count: self._count,
            exp.Sum: self._sum,
            exp.Min: self._min_max,
            exp.Max: self._min_max,
            **dict.fromkeys((exp.RowNumber, exp.Rank, exp.DenseRank, exp.Ntile), self._integer),
            exp.Lag: self._lag_lead,
            exp.Lead: self._lag_lead,
            exp.FirstValue: same,
            exp.LastValue: same,
            exp.Window: self._window,
            exp.WindowSpec: self._frame,
            exp.Limit: self._row_count,
            exp.Offset: self._row_count,
            exp.Ordered: self._ordered,
        }

    def visit(self, node: exp.Expr) -> None:
        rule = self._rules.get(type(node))
        if rule is not None:
            rule(node)

    def _named_function(self, node: exp.Expr) -> None:
        """The functions sqlglot does not know (allow_list.NAMED_FUNCTIONS)."""
        if node.name.lower() == "parse_decimal":
            self._parse_decimal(node)

    def _current_date(self, node: exp.Expr) -> None:
        """The run's date (UTC), one for the whole run: a quoted ISO date."""
        if node.this is not None:
            raise self.text.reject("CURRENT_DATE takes no time zone", node)
        self.set(node, exp.Literal.string(self.translator.today), DATE)

    def scalar_subquery(self, node: exp.Expr, outputs: Sequence[tuple[str, SqlType]]) -> None:
        if len(outputs) != 1:
            raise self.text.reject("a subquery used as a value must return one column", node)
        self.set(node, node, outputs[0][1])

    # -- literals and plain pass-through ---------------------------------------------

    def _literal(self, node: exp.Expr) -> None:
        assert isinstance(node, exp.Literal)
        if node.is_string:
            self.set(node, node, TEXT)
            return
        digits = node.this
        if not re.fullmatch(r"[0-9]+(\.[0-9]*)?", digits):
            raise self.text.reject(
                f"the number {digits} is a float: write it with its digits (1000 or 0.001)", node
            )
        scale = len(digits.partition(".")[2])
        if scale > MAX_SCALE:
            raise self.text.reject(f"the number {digits} has more than {MAX_SCALE} decimals", node)
        self.set(node, self.forms.decimal_literal(digits, scale), decimal_of(scale))

    def _paren(self, node: exp.Expr) -> None:
        for waiting in (QUOTIENT, PARSED):  # for the scale a ROUND or a CAST states
            if waiting in node.this.meta:
                node.meta[waiting] = node.this.meta[waiting]
                return
        self.set(node, node, self.kind(node.this))

    def _distinct(self, node: exp.Expr) -> None:
        if len(node.expressions) == 1:  # COUNT(DISTINCT x), SUM(DISTINCT x)
            self.set(node, node, self.kind(node.expressions[0]))

    def _same_as_first(self, node: exp.Expr) -> None:
        self.set(node, node, self.kind(node.this))

    def _integer(self, node: exp.Expr) -> None:
        if node.this is not None:
            self.expect(node.this, "an integer", lambda k: k.kind is ColumnType.INTEGER)
        self.set(node, node, INTEGER)

    def _numeric_same(self, node: exp.Expr) -> None:
        self.set(node, node, self.expect(node.this, "a number", numeric))

    # -- arithmetic ------------------------------------------------------------------

    def _interval(self, node: exp.Expr) -> None:
        parent = node.parent
        if not (isinstance(parent, exp.Add | exp.Sub) and parent.expression is node):
            raise self.text.reject(
                "an INTERVAL is only added to or subtracted from a date or a timestamp",
                parent or node,
            )
        amount, unit = str(node.name), str(node.args["unit"].name).upper().removesuffix("S")
        if not re.fullmatch(r"[+-]?[0-9]{1,9}", amount) or unit not in INTERVAL_SECONDS:
            raise self.text.reject(
                "an INTERVAL is a whole number of days, hours, minutes or seconds, "
                "as in INTERVAL '3 days'",
                node.parent or node,
            )
        node.meta[INTERVAL] = (int(amount) * INTERVAL_SECONDS[unit], unit)

    def _shifted(self, node: exp.Expr, sign: int) -> bool:
        """date or timestamp ± INTERVAL; False when the node is no such thing."""
        interval = node.expression.meta.get(INTERVAL)
        if interval is None:
            return False
        seconds, unit = interval
        kind = self.kind(node.this)
        if kind.kind is ColumnType.TIMESTAMP:
            self.set(node, self.forms.shift_timestamp(node.this, sign * seconds), kind)
        elif kind.kind is ColumnType.DATE and unit == "DAY":
            days = exp.Literal.number(sign * seconds // INTERVAL_SECONDS["DAY"])
            self.set(node, self.forms.add_days(node.this, days), DATE)
        else:
            raise self.text.reject(f"{unit.lower()}s cannot be added to {kind.describe()}", node)
        return True

    def _add(self, node: exp.Expr) -> None:
        if self._shifted(node, 1):
            return
        left, right = self.kind(node.this), self.kind(node.expression)
        if left.kind is ColumnType.DATE and right.kind is ColumnType.INTEGER:
            self.set(node, self.forms.add_days(node.this, node.expression), DATE)
        elif left.kind is ColumnType.INTEGER and right.kind is ColumnType.DATE:
            self.set(node, self.forms.add_days(node.expression, node.this), DATE)
        else:
            self._additive(node, "+", left, right)

    def _sub(self, node: exp.Expr) -> None:
        if self._shifted(node, -1):
            return
        left, right = self.kind(node.this), self.kind(node.expression)
        if left.kind is ColumnType.DATE and right.kind is ColumnType.INTEGER:
            days = exp.Neg(this=self.forms.template(":x", x=node.expression))
            self.set(node, self.forms.add_days(node.this, days), DATE)
        elif left.kind is ColumnType.DATE and right.kind is ColumnType.DATE:
            self.set(node, self.forms.days_between(node.this, node.expression), INTEGER)
        else:
            self._additive(node, "-", left, right)

    def _additive(self, node: exp.Expr, sign: str, left: SqlType, right: SqlType) -> None:
        common = unify(left, right)
        if common is None or not (common.is_numeric or common.is_null):
            raise self.text.reject(
                f"{sign} needs numbers (or a date and a number of days), "
                f"found {left.describe()} and {right.describe()}",
                node,
            )
        self.convert(node.this, common)
        self.convert(node.expression, common)
        self.set(node, node, common)

    def _mul(self, node: exp.Expr) -> None:
        left = self.expect(node.this, "a number", numeric)
        right = self.expect(node.expression, "a number", numeric)
        scale = left.scale + right.scale
        if scale > MAX_SCALE:
            raise self.text.reject(f"a product with more than {MAX_SCALE} decimals", node)
        self.set(node, node, decimal_of(scale) if not (left.is_null and right.is_null) else NULL)

    def _div(self, node: exp.Expr) -> None:
        num = self.expect(node.this, "a number", numeric)
        den = self.expect(node.expression, "a number", numeric)
        node.meta[QUOTIENT] = Quotient(node.this, num, node.expression, den)

    def _avg(self, node: exp.Expr) -> None:
        kind = self.expect(node.this, "a number", numeric)
        total, count = exp.Sum(this=node.this.copy()), exp.Count(this=node.this.copy())
        node.meta[QUOTIENT] = Quotient(total, kind, count, INTEGER, avg=True)

    def _window(self, node: exp.Expr) -> None:
        quotient = node.this.meta.get(QUOTIENT)
        if quotient is None:
            self.set(node, node, self.kind(node.this))
            return
        over = [node.copy(), node.copy()]
        over[0].set("this", quotient.num)
        over[1].set("this", quotient.den)
        node.meta[QUOTIENT] = Quotient(over[0], quotient.num_type, over[1], INTEGER, avg=True)

    def _frame(self, node: exp.Expr) -> None:
        """ROWS and GROUPS count rows or peer groups: a whole number. A RANGE offset is
        a distance in the ordering's values (a scaled integer on SQLite): refused."""
        for bound in (node.args.get("start"), node.args.get("end")):
            if not isinstance(bound, exp.Expr):
                continue  # UNBOUNDED, CURRENT ROW
            if str(node.args.get("kind")).upper() == "RANGE":
                raise self.text.reject(
                    "RANGE with an offset is not supported: use ROWS or GROUPS", node
                )
            if not isinstance(bound, exp.Literal) or self.kind(bound).kind is not (
                ColumnType.INTEGER
            ):
                raise self.text.reject("a window frame's offset must be a whole number", node)

    def _row_count(self, node: exp.Expr) -> None:
        """LIMIT and OFFSET take a whole number as written (SQLite would read 2.5 as the
        scaled 25)."""
        count = node.expression
        if isinstance(count, exp.Var) and count.name.upper() == "ALL":
            return  # LIMIT ALL: no limit on both
        if not isinstance(count, exp.Literal) or self.kind(count).kind is not ColumnType.INTEGER:
            raise self.text.reject(f"{node.key.upper()} takes a whole number, as in 10", node)

    def _round(self, node: exp.Expr) -> None:
        decimals = node.args.get("decimals")
        scale = 0
        if decimals is not None:
            if not (isinstance(decimals, exp.Literal) and decimals.this.isdigit()):
                raise self.text.reject(
                    "ROUND's scale must be a whole number, as in ROUND(x, 2)", node
                )
            scale = int(decimals.this)
            # The literal was rewritten as a scaled integer: its digits are its text.
        if scale > MAX_SCALE:
            raise self.text.reject(f"ROUND's scale must be at most {MAX_SCALE}", node)
        self.set(node, self.to_scale(node.this, decimal_of(scale), "ROUND"), decimal_of(scale))

    # -- comparisons and logic -------------------------------------------------------

    def _compare(self, node: exp.Expr) -> None:
        common = self.common([node.this, node.expression], node)
        if not isinstance(node, exp.EQ | exp.NEQ):
            self.ordered(node.this, common)
        self.set(node, node, BOOLEAN)

    def _ordered(self, node: exp.Expr) -> None:
        if isinstance(node.this, exp.Column) and not node.this.table:
            return  # an output's name: the output is already in order
        self.ordered(node.this, self.kind(node.this))

    def _logical(self, node: exp.Expr) -> None:
        for operand in (node.this, node.args.get("expression")):
            if operand is not None:
                self.expect(operand, "a condition", lambda k: k.kind is ColumnType.BOOLEAN)
        self.set(node, node, BOOLEAN)

    def _between(self, node: exp.Expr) -> None:
        common = self.common([node.this, node.args["low"], node.args["high"]], node)
        self.ordered(node.this, common)
        self.set(node, node, BOOLEAN)

    def _in(self, node: exp.Expr) -> None:
        query = node.args.get("query")
        if query is None:
            self.common([node.this, *node.expressions], node)
        else:
            outputs = self.translator.outputs_of(query)
            if len(outputs) != 1:
                raise self.text.reject("a subquery after IN must return one column", node)
            common = self.unify_or_reject(self.kind(node.this), outputs[0][1], node)
            self.convert(node.this, common)
            self.translator.conform(query, [common])
        self.set(node, node, BOOLEAN)

    def _like(self, node: exp.Expr) -> None:
        """[NOT] LIKE and [NOT] ILIKE, with their ESCAPE (the parent `Escape` node, which
        `_escape` then drops): one backslash-escaped pattern for both backends' forms.
        ILIKE folds ASCII letters, as `lower` does."""
        name = ("NOT " if node.args.get("negate") else "") + node.key.upper()
        self.expect(node.this, "text", textual)
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise self.text.reject(f"{name} needs a quoted pattern, as in x {name} 'AB%'", node)
        escape = "\\"
        if isinstance(node.parent, exp.Escape):
            written = node.parent.expression
            if not (
                isinstance(written, exp.Literal) and written.is_string and len(written.this) < 2
            ):
                raise self.text.reject("ESCAPE takes one quoted character, as in ESCAPE '!'", node)
            escape = written.this
        try:
            canonical = like_pattern(pattern.this, escape)
        except ValueError:
            raise self.text.reject(
                f"the {name} pattern '{pattern.this}' ends with its escape character", node
            ) from None
        subject = node.this
        if isinstance(node, exp.ILike):
            subject, canonical = self.forms.lower(subject), ascii_lower(canonical)
        matched = self.forms.like(subject, canonical)
        if node.args.get("negate"):
            matched = self.forms.template("NOT :x", x=matched)
        self.set(node, matched, BOOLEAN)

    def _escape(self, node: exp.Expr) -> None:
        """`x LIKE p ESCAPE e`: `_like` read the escape into its form."""
        self.set(node, node.this, BOOLEAN)

    def _distinct_from(self, node: exp.Expr) -> None:
        """IS [NOT] DISTINCT FROM (sqlglot writes SQLite's `IS [NOT]`)."""
        self.common([node.this, node.expression], node)
        self.set(node, node, BOOLEAN)

    def _is(self, node: exp.Expr) -> None:
        """IS [NOT] NULL takes any value; IS [NOT] TRUE/FALSE a condition (SQLite would
        read a number as one, PostgreSQL refuses it)."""
        if isinstance(node.expression, exp.Boolean):
            self.expect(node.this, "a condition", lambda k: k.kind is ColumnType.BOOLEAN)
        elif not isinstance(node.expression, exp.Null):  # SQLite's `x IS 'a'`
            raise self.text.reject(
                "IS takes NULL, TRUE or FALSE; to compare values with NULLs equal, "
                "write IS NOT DISTINCT FROM",
                node,
            )
        self.set(node, node, BOOLEAN)

    def _case(self, node: exp.Expr) -> None:
        branches = node.args.get("ifs") or []
        if node.this is not None:
            self.common([node.this, *(b.this for b in branches)], node)
        else:
            for branch in branches:
                self.expect(branch.this, "a condition", lambda k: k.kind is ColumnType.BOOLEAN)
        results = [b.args["true"] for b in branches]
        if node.args.get("default") is not None:
            results.append(node.args["default"])
        self.set(node, node, self.common(results, node))

    def _coalesce(self, node: exp.Expr) -> None:
        self.set(node, node, self.common([node.this, *node.expressions], node))

    # -- shared helpers --------------------------------------------------------------
