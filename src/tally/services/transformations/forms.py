"""Each typed operation as SQL for one backend, over tally's stored forms: on SQLite a
decimal is an integer scaled by 10**scale and a timestamp canonical ISO text; on
PostgreSQL both are its own types (NUMERIC, TIMESTAMP[TZ]). Dates are ISO text on both.

Both backends compute every rounding exactly in integers (half away from zero, as
PostgreSQL's ROUND on NUMERIC), so they agree digit for digit; no float holds a value.
"""

from __future__ import annotations

import functools
from decimal import Decimal
import re
from abc import ABC, abstractmethod

import sqlglot
from sqlglot import exp

from tally.core.columns import INT64_MAX, ColumnType
from tally.services.transformations.sql_types import SqlType

ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
PG_NUMERIC = "NUMERIC(38, {scale})"  # the stored type of a PostgreSQL decimal column
_ATOMS = (exp.Column, exp.Literal, exp.Paren, exp.Func, exp.Null, exp.Boolean, exp.Case)
_SQLITE_PARTS = {"YEAR": "%Y", "MONTH": "%m", "DAY": "%d", "HOUR": "%H", "MINUTE": "%M"}
_SQLITE_PARTS["DOW"] = "%w"
_SQLITE_TRUNC = {"YEAR": "%Y-01-01", "MONTH": "%Y-%m-01", "DAY": "%Y-%m-%d"}


def atom(node: exp.Expr) -> exp.Expr:
    """The node, in parentheses unless it is one token or call."""
    return node if isinstance(node, _ATOMS) else exp.Paren(this=node)


@functools.lru_cache(maxsize=256)
def _parsed(sql: str, dialect: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read=dialect)


class Forms(ABC):
    """The operations both backends write alike; subclasses write the rest."""

    dialect = ""

    def template(self, sql: str, **parts: exp.Expr) -> exp.Expr:
        """`sql` in this backend's dialect with each `:name` replaced by a copy of a part."""

        def fill(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Placeholder):
                return atom(parts[node.name].copy())
            return node

        return atom(_parsed(sql, self.dialect).transform(fill))

    def bool_to_int(self, node: exp.Expr) -> exp.Expr:
        return self.template("CASE WHEN :x THEN 1 WHEN NOT :x THEN 0 END", x=node)

    def int_to_bool(self, node: exp.Expr) -> exp.Expr:
        return self.template(":x <> 0", x=node)

    def concat(self, parts: list[exp.Expr]) -> exp.Expr:
        """CONCAT skips NULLs (PostgreSQL's rule; SQLite 3.40 has no CONCAT)."""
        filled = [self.template("COALESCE(:x, '')", x=p) for p in parts]
        return atom(functools.reduce(lambda a, b: exp.DPipe(this=a, expression=b), filled))

    def like(self, node: exp.Expr, pattern: str) -> exp.Expr:
        return self.template(":x LIKE :p", x=node, p=exp.Literal.string(pattern))

    def ordered_text(self, node: exp.Expr) -> exp.Expr:
        """Text (or a date) whose order matters: byte order on both backends."""
        return node

    # Written by each backend (see the subclasses' docstrings).
    @abstractmethod
    def decimal_literal(self, digits: str, scale: int) -> exp.Expr: ...
    @abstractmethod
    def rescale(self, node: exp.Expr, by: int) -> exp.Expr: ...
    @abstractmethod
    def reduce_scale(self, node: exp.Expr, *, scale: int, to: int) -> exp.Expr: ...
    @abstractmethod
    def quotient(
        self, num: exp.Expr, num_scale: int, den: exp.Expr, den_scale: int, scale: int
    ) -> exp.Expr: ...
    @abstractmethod
    def to_text(self, node: exp.Expr, kind: SqlType) -> exp.Expr: ...
    @abstractmethod
    def lower(self, node: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def upper(self, node: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def trim(self, node: exp.Expr, chars: exp.Expr | None, side: str) -> exp.Expr: ...
    @abstractmethod
    def substring(self, node: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr: ...
    @abstractmethod
    def regexp(self, name: str, *args: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def extract(self, part: str, node: exp.Expr, kind: SqlType) -> exp.Expr: ...
    @abstractmethod
    def truncate(self, unit: str, node: exp.Expr, kind: SqlType) -> exp.Expr: ...
    @abstractmethod
    def add_days(self, node: exp.Expr, days: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def days_between(self, later: exp.Expr, earlier: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def date_to_timestamp(self, node: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def timestamp_to_date(self, node: exp.Expr) -> exp.Expr: ...
    @abstractmethod
    def timestamp_literal(self, canonical: str, *, timezone: bool) -> exp.Expr: ...
    @abstractmethod
    def typed_null(self, kind: SqlType) -> exp.Expr: ...
    @abstractmethod
    def output(self, node: exp.Expr, kind: SqlType) -> exp.Expr: ...


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

    def trim(self, node: exp.Expr, chars: exp.Expr | None, side: str) -> exp.Expr:
        name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(side, "trim")
        if chars is None:
            return self.template(f"{name}(:x)", x=node)
        return self.template(f"{name}(:x, :c)", x=node, c=chars)

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
        return self.template(f"CAST(strftime('{_SQLITE_PARTS[part]}', :x) AS INTEGER)", x=node)

    def truncate(self, unit: str, node: exp.Expr, kind: SqlType) -> exp.Expr:
        pattern = _SQLITE_TRUNC[unit]
        if kind.kind is ColumnType.TIMESTAMP:
            pattern += "T00:00:00"
        return self.template(f"strftime('{pattern}', :x)", x=node)

    def add_days(self, node: exp.Expr, days: exp.Expr) -> exp.Expr:
        return self.template("date(:x, :n || ' days')", x=node, n=days)  # NULL days: NULL

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

    def output(self, node: exp.Expr, kind: SqlType) -> exp.Expr:
        """A number past int64 became a float in SQLite's arithmetic: the run fails
        (storage/sql_functions.py) rather than store it."""
        if kind.is_numeric:
            return self.template(
                "CASE WHEN typeof(:x) = 'real' THEN tally_overflow(:x) ELSE :x END", x=node
            )
        return node


class PostgresForms(Forms):
    dialect = "postgres"

    def ordered_text(self, node: exp.Expr) -> exp.Expr:
        """The inputs' text columns are COLLATE "C"; a literal or a text made from
        another type would otherwise order by the database's collation."""
        return self.template(':x COLLATE "C"', x=node)

    def decimal_literal(self, digits: str, scale: int) -> exp.Expr:
        return exp.Literal.number(digits)

    def rescale(self, node: exp.Expr, by: int) -> exp.Expr:
        return node  # a NUMERIC carries its value, whatever its scale

    def reduce_scale(self, node: exp.Expr, *, scale: int, to: int) -> exp.Expr:
        return self.template(f"round(:x, {to})", x=node)  # half away from zero

    def quotient(
        self, num: exp.Expr, num_scale: int, den: exp.Expr, den_scale: int, scale: int
    ) -> exp.Expr:
        """As SQLite's, in NUMERIC: `div` and `%` are exact on NUMERIC (a division to a
        fixed precision, then ROUND, would round twice)."""
        n = self.template(f"CAST(:n AS NUMERIC) * {10**scale}", n=num)
        d = self.template("CAST(NULLIF(:d, 0) AS NUMERIC)", d=den)
        q = self.template(
            "div(abs(:n), abs(:d)) + CASE WHEN abs(:n) % abs(:d) * 2 >= abs(:d) THEN 1 ELSE 0 END",
            n=n,
            d=d,
        )
        signed = self.template("CASE WHEN (:n < 0) = (:d < 0) THEN :q ELSE -:q END", n=n, d=d, q=q)
        if scale == 0:
            return signed
        return self.template(f":x * 0.{'0' * (scale - 1)}1", x=signed)

    def to_text(self, node: exp.Expr, kind: SqlType) -> exp.Expr:
        if kind.kind is ColumnType.DECIMAL:
            numeric = PG_NUMERIC.format(scale=kind.scale)
            return self.template(f"CAST(CAST(:x AS {numeric}) AS TEXT)", x=node)
        if kind.kind is ColumnType.TIMESTAMP and kind.timezone:
            return self.template(
                "replace(CAST(:x AT TIME ZONE 'UTC' AS TEXT), ' ', 'T') || 'Z'", x=node
            )
        if kind.kind is ColumnType.TIMESTAMP:
            return self.template("replace(CAST(:x AS TEXT), ' ', 'T')", x=node)
        if kind.kind in (ColumnType.INTEGER, ColumnType.BOOLEAN, None):
            return self.template("CAST(:x AS TEXT)", x=node)
        return node

    def lower(self, node: exp.Expr) -> exp.Expr:
        lower = ASCII_UPPER.lower()
        return self.template(f"translate(:x, '{ASCII_UPPER}', '{lower}')", x=node)

    def upper(self, node: exp.Expr) -> exp.Expr:
        lower = ASCII_UPPER.lower()
        return self.template(f"translate(:x, '{lower}', '{ASCII_UPPER}')", x=node)

    def trim(self, node: exp.Expr, chars: exp.Expr | None, side: str) -> exp.Expr:
        name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(side, "btrim")
        if chars is None:
            return self.template(f"{name}(:x)", x=node)
        return self.template(f"{name}(:x, :c)", x=node, c=chars)

    def substring(self, node: exp.Expr, start: exp.Expr, length: exp.Expr | None) -> exp.Expr:
        if length is None:
            return self.template("substr(:x, :s)", x=node, s=start)
        return self.template("substr(:x, :s, GREATEST(:n, 0))", x=node, s=start, n=length)

    def regexp(self, name: str, *args: exp.Expr) -> exp.Expr:
        if name == "like":
            return self.template(":a ~ :b", a=args[0], b=args[1])
        names = ", ".join(f":a{i}" for i in range(len(args)))
        parts = {f"a{i}": a for i, a in enumerate(args)}
        return self.template(f"regexp_{name}({names})", **parts)

    def extract(self, part: str, node: exp.Expr, kind: SqlType) -> exp.Expr:
        if kind.kind is ColumnType.DATE:
            node = self.template("CAST(:x AS DATE)", x=node)
        return self.template(f"CAST(EXTRACT({part} FROM :x) AS BIGINT)", x=node)

    def truncate(self, unit: str, node: exp.Expr, kind: SqlType) -> exp.Expr:
        if kind.kind is ColumnType.TIMESTAMP:
            return self.template(f"date_trunc('{unit.lower()}', :x)", x=node)
        return self.template(
            f"to_char(date_trunc('{unit.lower()}', CAST(:x AS DATE)), 'YYYY-MM-DD')", x=node
        )

    def add_days(self, node: exp.Expr, days: exp.Expr) -> exp.Expr:
        return self.template(
            "to_char(CAST(:x AS DATE) + CAST(:n AS INTEGER), 'YYYY-MM-DD')", x=node, n=days
        )

    def days_between(self, later: exp.Expr, earlier: exp.Expr) -> exp.Expr:
        return self.template(
            "CAST(CAST(:a AS DATE) - CAST(:b AS DATE) AS BIGINT)", a=later, b=earlier
        )

    def date_to_timestamp(self, node: exp.Expr) -> exp.Expr:
        return self.template("CAST(CAST(:x AS DATE) AS TIMESTAMP)", x=node)

    def timestamp_to_date(self, node: exp.Expr) -> exp.Expr:
        return self.template("to_char(:x, 'YYYY-MM-DD')", x=node)

    def timestamp_literal(self, canonical: str, *, timezone: bool) -> exp.Expr:
        kind = "TIMESTAMPTZ" if timezone else "TIMESTAMP"
        return self.template(f"CAST(:x AS {kind})", x=exp.Literal.string(canonical))

    def typed_null(self, kind: SqlType) -> exp.Expr:
        return self.output(exp.Null(), kind)

    def output(self, node: exp.Expr, kind: SqlType) -> exp.Expr:
        """The stored type of the output column (PostgreSQL's SUM of BIGINT is NUMERIC,
        a CASE of 1.5 and 2.25 mixes scales)."""
        if kind.kind is ColumnType.INTEGER:
            return self.template("CAST(:x AS BIGINT)", x=node)
        if kind.kind is ColumnType.DECIMAL:
            # The stored forms' bound (decision 0001): past it the BIGINT cast fails.
            unit, bound = 10**kind.scale, Decimal(INT64_MAX).scaleb(-kind.scale)
            numeric = PG_NUMERIC.format(scale=kind.scale)
            return self.template(
                f"CAST(CASE WHEN abs(:x) > {bound} THEN CAST(:x * {unit} AS BIGINT) ELSE :x END"
                f" AS {numeric})",
                x=node,
            )
        if kind.kind is None:  # a text cast would drop the inputs' "C" collation
            return self.template("CAST(:x AS TEXT)", x=node)
        if kind.kind in (ColumnType.TEXT, ColumnType.DATE):
            return self.ordered_text(node)  # ORDER BY may name the output
        if kind.kind is ColumnType.BOOLEAN:
            return self.template("CAST(:x AS BOOLEAN)", x=node)
        return self.template(
            f"CAST(:x AS {'TIMESTAMPTZ' if kind.timezone else 'TIMESTAMP'})", x=node
        )


def like_to_regexp(pattern: str) -> str:
    """A LIKE pattern (backslash escapes, PostgreSQL's default) as a whole-text regular
    expression."""
    out, chars = [], iter(pattern)
    for char in chars:
        if char == "\\":
            out.append(re.escape(next(chars, "\\")))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return "(?s)\\A" + "".join(out) + "\\Z"
