"""SQLite's forms of the typed operations: a decimal is an integer scaled by 10**scale, a
timestamp canonical ISO text, a boolean 0 or 1; every rounding is integer arithmetic."""

from __future__ import annotations

from sqlglot import exp

from tally.core.columns import ColumnType
from tally.core.sql_types import SqlType
from tally.storage.sql_conversions import DateFormat, NumberFormat
from tally.storage.sql_forms.forms import Forms, like_to_regexp, may_pass_int64

_PARTS = {"YEAR": "%Y", "MONTH": "%m", "DAY": "%d", "HOUR": "%H", "MINUTE": "%M", "DOW": "%w"}
_TRUNCATED = {"YEAR": "%Y-01-01", "MONTH": "%Y-%m-01", "DAY": "%Y-%m-%d"}


class SqliteForms(Forms):
    dialect = "sqlite"

    def decimal_literal(self, digits: str, scale: int) -> exp.Expr:
        whole, _, fraction = digits.partition(".")
        return exp.Literal.number(int(whole + fraction.ljust(scale, "0")))

    def rescale(self, node: exp.Expr, by: int) -> exp.Expr:
        return node if by == 0 else self.template(f":x * {10**by}", x=node)

    def reduce_scale(self, node: exp.Expr, *, scale: int, to: int) -> exp.Expr:
        return self.quotient(node, scale, exp.Literal.number(1), 0, to)

    def quotient(
        self, num: exp.Expr, num_scale: int, den: exp.Expr, den_scale: int, scale: int
    ) -> exp.Expr:
        """round(num / den) at `scale`, half away from zero, in integer arithmetic: the
        quotient and the remainder of |N| / |D| never leave int64 where N and D fit."""
        shift = den_scale + scale - num_scale
        n = self.rescale(num, max(shift, 0))
        d = self.rescale(self.template("NULLIF(:d, 0)", d=den), max(-shift, 0))
        q = self.template("abs(:n) / abs(:d) + (abs(:n) % abs(:d) * 2 >= abs(:d))", n=n, d=d)
        return self.template("CASE WHEN (:n < 0) = (:d < 0) THEN :q ELSE -:q END", n=n, d=d, q=q)

    def to_text(self, node: exp.Expr, kind: SqlType) -> exp.Expr:
        if kind.kind is ColumnType.DECIMAL:
            unit, digits = 10**kind.scale, f"%d.%0{kind.scale}d"
            return self.template(
                f"CASE WHEN :x < 0 THEN printf('-{digits}', -:x / {unit}, -:x % {unit})"
                f" WHEN :x >= 0 THEN printf('{digits}', :x / {unit}, :x % {unit}) END",
                x=node,
            )
        if kind.kind is ColumnType.BOOLEAN:
            return self.template("CASE WHEN :x THEN 'true' WHEN NOT :x THEN 'false' END", x=node)
        if kind.kind is ColumnType.TIMESTAMP and kind.timezone:
            return self.template(":x || 'Z'", x=node)
        if kind.kind is ColumnType.INTEGER:
            return self.template("CAST(:x AS TEXT)", x=node)
        return node

    def lower(self, node: exp.Expr) -> exp.Expr:
        return self.template("lower(:x)", x=node)  # ASCII letters only, as SQLite's

    def upper(self, node: exp.Expr) -> exp.Expr:
        return self.template("upper(:x)", x=node)

    def substring(self, node: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr:
        """PostgreSQL's positions: a start before 1 counts from an imaginary position 0,
        not from the end as SQLite's would."""
        if length is None:
            return self.template("substr(:x, max(:s, 1))", x=node, s=start)
        return self.template(
            "substr(:x, max(:s, 1), max(:s + :n - max(:s, 1), 0))", x=node, s=start, n=length
        )

    def like(self, node: exp.Expr, pattern: str) -> exp.Expr:
        """SQLite's LIKE ignores ASCII case: the pattern becomes a regular expression."""
        return self.regexp("like", node, exp.Literal.string(like_to_regexp(pattern)))

    def regexp(self, name: str, *args: exp.Expr) -> exp.Expr:
        """The functions storage/sql_functions.py registers on every SQLite connection."""
        names = ", ".join(f":a{i}" for i in range(len(args)))
        parts = {f"a{i}": a for i, a in enumerate(args)}
        return self.template(f"tally_regexp_{name}({names})", **parts)

    def extract(self, part: str, node: exp.Expr, kind: SqlType) -> exp.Expr:
        if part == "QUARTER":
            return self.template("(CAST(strftime('%m', :x) AS INTEGER) + 2) / 3", x=node)
        return self.template(f"CAST(strftime('{_PARTS[part]}', :x) AS INTEGER)", x=node)

    def truncate(self, unit: str, node: exp.Expr, kind: SqlType) -> exp.Expr:
        pattern = _TRUNCATED[unit]
        if kind.kind is ColumnType.TIMESTAMP:
            pattern += "T00:00:00"
        return self.template(f"strftime('{pattern}', :x)", x=node)

    def add_days(self, node: exp.Expr, days: exp.Expr) -> exp.Expr:
        return self.template("date(:x, :n || ' days')", x=node, n=days)  # NULL days: NULL

    def shift_timestamp(self, node: exp.Expr, seconds: int) -> exp.Expr:
        """Whole seconds: the canonical text's fraction (from its 20th character) is kept."""
        return self.template(
            f"(replace(datetime(:x, '{seconds:+d} seconds'), ' ', 'T') || substr(:x, 20))", x=node
        )

    def days_between(self, later: exp.Expr, earlier: exp.Expr) -> exp.Expr:
        return self.template("CAST(julianday(:a) - julianday(:b) AS INTEGER)", a=later, b=earlier)

    def date_to_timestamp(self, node: exp.Expr) -> exp.Expr:
        return self.template(":x || 'T00:00:00'", x=node)

    def timestamp_to_date(self, node: exp.Expr) -> exp.Expr:
        return self.template("substr(:x, 1, 10)", x=node)

    def timestamp_literal(self, canonical: str, *, timezone: bool) -> exp.Expr:
        return exp.Literal.string(canonical)

    def typed_null(self, kind: SqlType) -> exp.Expr:
        return exp.Null()

    def text_to_number(
        self, node: exp.Expr, scale: int, number: NumberFormat, context: exp.Expr | None
    ) -> exp.Expr:
        """storage/sql_functions.py reads it."""
        return self.template(
            f"tally_to_number(:x, {scale}, :d, :t, :c)",
            x=node,
            d=_text_or_null(number.decimal),
            t=exp.Literal.string(number.thousands),
            c=context or exp.Null(),
        )

    def text_to_date(self, node: exp.Expr, date: DateFormat, context: exp.Expr | None) -> exp.Expr:
        return self.template(
            f"tally_to_date(:x, :f, {int(date.flexible)}, :c)",
            x=node,
            f=exp.Literal.string(date.written),
            c=context or exp.Null(),
        )

    def output(self, node: exp.Expr, kind: SqlType) -> exp.Expr:
        """A number past int64 became a float in SQLite's arithmetic: the run fails
        (storage/sql_functions.py) rather than store it."""
        if kind.is_numeric and may_pass_int64(node):
            return self.template(
                "CASE WHEN typeof(:x) = 'real' THEN tally_overflow(:x) ELSE :x END", x=node
            )
        return node


def _text_or_null(text: str | None) -> exp.Expr:
    return exp.Null() if text is None else exp.Literal.string(text)
