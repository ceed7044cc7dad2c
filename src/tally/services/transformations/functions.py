"""The type rules and rewrites of the allowed functions: text, regular expressions,
dates, conversions of text (`to_date`, `parse_decimal`), aggregates and windows
(expressions.py holds the operators)."""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from tally.core.columns import ColumnType
from tally.core.sql_types import BOOLEAN, DATE, INTEGER, TEXT
from tally.services.transformations.allow_list import DATE_PARTS, TRUNC_UNITS
from tally.services.transformations.casts import PARSED, Casts, Parsed, numeric, temporal, textual
from tally.storage.sql_conversions import DateFormat, NumberFormat
from tally.storage.sql_functions import PatternError, compile_pattern

# sqlglot reads to_date's format into strftime's codes: back to PostgreSQL's tokens.
_STRFTIME_TOKENS = {"%Y": "YYYY", "%m": "MM", "%d": "DD"}


class FunctionRules(Casts):
    # -- text ------------------------------------------------------------------------

    def _text_function(self, node: exp.Expr, form: Callable[[exp.Expr], exp.Expr]) -> None:
        self.expect(node.this, "text", textual)
        self.set(node, form(node.this), TEXT)

    def _trim(self, node: exp.Expr) -> None:
        self.expect(node.this, "text", textual)
        chars = node.expression
        if chars is not None:
            self.expect(chars, "text", textual)
        side = str(node.args.get("position") or "BOTH").upper()
        self.set(node, self.forms.trim(node.this, chars, side), TEXT)

    def _substring(self, node: exp.Expr) -> None:
        self.expect(node.this, "text", textual)
        start, length = node.args.get("start"), node.args.get("length")
        if start is None or self.kind(start).kind is ColumnType.TEXT:
            raise self.text.reject(
                "SUBSTRING needs a start position; for a pattern use REGEXP_SUBSTR(x, pattern)",
                node,
            )
        for number in (start, length):
            if number is not None:
                self.expect(number, "an integer", lambda k: k.kind is ColumnType.INTEGER)
        self.set(node, self.forms.substring(node.this, start, length), TEXT)

    def _replace(self, node: exp.Expr) -> None:
        for part in (node.this, node.expression, node.args["replacement"]):
            self.expect(part, "text", textual)
        self.set(node, node, TEXT)

    def _length(self, node: exp.Expr) -> None:
        if node.args.get("encoding") is not None or node.args.get("binary"):
            raise self.text.reject("length takes one argument, a text", node)
        self.expect(node.this, "text", textual)
        self.set(node, node, INTEGER)

    def _concat(self, node: exp.Expr) -> None:
        parts = [self.forms.to_text(p, self.kind(p)) for p in node.expressions]
        self.set(node, self.forms.concat(parts), TEXT)

    def _dpipe(self, node: exp.Expr) -> None:
        left = self.forms.to_text(node.this, self.kind(node.this))
        right = self.forms.to_text(node.expression, self.kind(node.expression))
        self.set(node, exp.Paren(this=exp.DPipe(this=left, expression=right)), TEXT)

    def _regexp(self, node: exp.Expr) -> None:
        names: dict[type[exp.Expr], str] = {exp.RegexpLike: "like", exp.RegexpReplace: "replace"}
        name = names.get(type(node), "substr")
        extra = set(node.args) - {"this", "expression", "replacement", "single_replace"}
        if any(node.args.get(key) is not None for key in extra):
            raise self.text.reject(f"REGEXP_{name.upper()} takes no flags or positions", node)
        args = [node.this, node.expression]
        if name == "replace":
            args.append(node.args.get("replacement"))
        if any(arg is None for arg in args):
            raise self.text.reject(f"REGEXP_{name.upper()} is missing an argument", node)
        for arg in args:
            self.expect(arg, "text", textual)
        pattern = node.expression
        if isinstance(pattern, exp.Literal):  # refused here on both backends, as RE2 would
            try:
                compile_pattern(pattern.this, groups=True)
            except PatternError as error:
                raise self.text.reject(str(error), node) from None
        self.set(node, self.forms.regexp(name, *args), BOOLEAN if name == "like" else TEXT)

    # -- dates -----------------------------------------------------------------------

    def _extract(self, node: exp.Expr) -> None:
        part = node.this.name.upper()
        kind = self.expect(node.expression, "a date or a timestamp", temporal)
        if part not in DATE_PARTS or (kind.kind is ColumnType.DATE and part in ("HOUR", "MINUTE")):
            raise self.text.reject(f"EXTRACT({part} FROM {kind.describe()}) is not supported", node)
        self.set(node, self.forms.extract(part, node.expression, kind), INTEGER)

    def _truncate(self, node: exp.Expr) -> None:
        if node.args.get("zone") is not None:
            raise self.text.reject("date_trunc takes no time zone", node)
        unit = node.args["unit"].name.upper()
        if unit not in TRUNC_UNITS:
            raise self.text.reject(f"DATE_TRUNC to '{unit.lower()}' is not supported", node)
        kind = self.expect(node.this, "a date or a timestamp", temporal)
        self.set(node, self.forms.truncate(unit, node.this, kind), kind)

    # -- conversions of text ---------------------------------------------------------

    def _to_date(self, node: exp.Expr) -> None:
        """to_date(text, 'DD/MM/YYYY'): PostgreSQL's name and tokens (YYYY, MM, DD and
        separators only)."""
        written = node.args.get("format")
        extra = set(node.args) - {"this", "format"}
        if any(node.args.get(key) for key in extra) or written is None:
            raise self.text.reject(
                "to_date takes a text and a format, as in to_date(x, 'DD/MM/YYYY')", node
            )
        if not (isinstance(written, exp.Literal) and written.is_string):
            raise self.text.reject(
                "to_date's format must be a quoted text, as in 'DD/MM/YYYY'", node
            )
        try:
            date = DateFormat.parse(_pg_format(written.this))
        except ValueError as error:
            raise self.text.reject(f"to_date: {error}", node) from None
        self.expect(node.this, "text", textual)
        what = f"to_date with {date.written}"
        context = self.context(node, what, node.this)
        self.literal_fits(node.this, date.read, what)
        safe = self.under_try(node)
        self.set(node, self.forms.text_to_date(node.this, date, None if safe else context), DATE)

    def _parse_decimal(self, node: exp.Expr) -> None:
        """parse_decimal(text, decimal_separator[, thousands_separator]): a value whose
        scale a CAST to DECIMAL(p, s) or a ROUND(x, s) states (as a division's)."""
        args = node.expressions
        if len(args) not in (2, 3):
            raise self.text.reject(
                "parse_decimal takes a text, a decimal separator and optionally a thousands "
                "separator, as in parse_decimal(x, ',', '.')",
                node,
            )
        self.expect(args[0], "text", textual)
        separators = args[1:]
        if not all(isinstance(a, exp.Literal) and a.is_string for a in separators):
            raise self.text.reject("parse_decimal's separators must be quoted texts", node)
        try:
            number = NumberFormat(*(a.this for a in separators))
        except ValueError as error:
            raise self.text.reject(f"parse_decimal: {error}", node) from None
        context = self.context(node, "parse_decimal", args[0])
        node.meta[PARSED] = Parsed(args[0], number, context)

    # -- aggregates and windows ------------------------------------------------------

    def _sum(self, node: exp.Expr) -> None:
        self.set(node, node, self.expect(node.this, "a number", numeric))

    def _count(self, node: exp.Expr) -> None:
        counted = node.this.expressions if isinstance(node.this, exp.Distinct) else []
        if node.expressions or len(counted) > 1:
            raise self.text.reject("COUNT takes one argument", node)
        self.set(node, node, INTEGER)

    def _min_max(self, node: exp.Expr) -> None:
        if node.expressions:  # SQLite's max(a, b) is GREATEST, but NULL if any is NULL
            raise self.text.reject(f"{node.key.upper()} takes one argument", node)
        kind = self.kind(node.this)
        if kind.kind is ColumnType.BOOLEAN:
            raise self.text.reject(f"{node.key.upper()} of a boolean is not supported", node)
        self.ordered(node.this, kind)
        self.set(node, node, kind)

    def _lag_lead(self, node: exp.Expr) -> None:
        offset, default = node.args.get("offset"), node.args.get("default")
        if offset is not None:
            self.expect(offset, "an integer", lambda k: k.kind is ColumnType.INTEGER)
        kind = self.kind(node.this)
        if default is not None:
            kind = self.common([node.this, default], node)
        self.set(node, node, kind)


def _pg_format(strftime: str) -> str:
    """The PostgreSQL tokens of a format sqlglot read into strftime's codes; anything
    else is kept as it is (and refused by DateFormat.parse)."""
    out, index = [], 0
    while index < len(strftime):
        code = strftime[index : index + 2]
        if code in _STRFTIME_TOKENS:
            out.append(_STRFTIME_TOKENS[code])
            index += 2
        else:
            out.append(strftime[index])
            index += 1
    return "".join(out)
