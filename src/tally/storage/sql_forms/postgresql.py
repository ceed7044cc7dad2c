"""PostgreSQL's forms of the typed operations: decimals are NUMERIC and timestamps
TIMESTAMP[TZ] (decision 0009), text compares by bytes (COLLATE "C", as the inputs'
columns), and results take the output columns' stored types."""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from tally.core.columns import INT64_MAX, ColumnType
from tally.core.sql_types import SqlType
from tally.storage.resource_tables.ddl import PG_NUMERIC_PRECISION
from tally.storage.sql_conversions import (
    DATE_TOKENS,
    MAX_NUMBER_CHARS,
    NOT_A_NUMBER,
    NOT_WHOLE,
    OUT_OF_RANGE,
    SHOWN_CHARS,
    DateFormat,
    NumberFormat,
)
from tally.storage.sql_forms.forms import ASCII_UPPER, Forms, may_pass_int64

PG_NUMERIC = f"NUMERIC({PG_NUMERIC_PRECISION}, {{scale}})"  # a decimal column's stored type
# A value that does not convert fails the statement by a cast of its message to an
# integer (plain SQL has no RAISE): `invalid input syntax for type integer:
# "tally-failed:<message>"`, which storage/transformation_sql.py reads back.
FAILED_MARK = "tally-failed:"
_DAYS = (
    "CASE WHEN :m IN (4, 6, 9, 11) THEN 30 WHEN :m = 2 THEN CASE WHEN :y % 4 = 0"
    " AND (:y % 100 <> 0 OR :y % 400 = 0) THEN 29 ELSE 28 END ELSE 31 END"
)


class PostgresForms(Forms):
    dialect = "postgres"
    trim_both = "btrim"

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

    def shift_timestamp(self, node: exp.Expr, seconds: int) -> exp.Expr:
        return self.template(f":x + INTERVAL '{seconds} seconds'", x=node)

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

    def text_to_number(
        self, node: exp.Expr, scale: int, number: NumberFormat, context: exp.Expr | None
    ) -> exp.Expr:
        """The grammar's regular expression, then NUMERIC's own reading of the plain
        digits (it skips the whitespace around them), rounded half away from zero."""
        plain = node
        for separator in number.thousands_written:
            thousands = exp.Literal.string(separator)
            plain = self.template("replace(:x, :t, '')", x=plain, t=thousands)
        if number.decimal not in (None, "."):
            point = exp.Literal.string(str(number.decimal))
            plain = self.template("replace(:x, :d, '.')", x=plain, d=point)
        value = self.template(f"round(CAST(:p AS NUMERIC), {scale})", p=plain)
        bound = Decimal(INT64_MAX).scaleb(-scale)
        unfit = NOT_A_NUMBER if number.decimal is not None else NOT_WHOLE
        return self.template(
            f"CASE WHEN :x IS NULL THEN NULL WHEN NOT :x ~ :re THEN :unfit"
            f" WHEN length(:x) > {MAX_NUMBER_CHARS} THEN :range"  # before NUMERIC reads it
            f" WHEN abs(:v) > {bound} THEN :range ELSE :v END",
            x=node,
            re=exp.Literal.string(number.pattern),
            v=value,
            unfit=self._failed(node, unfit, context, "NUMERIC"),
            range=self._failed(node, OUT_OF_RANGE, context, "NUMERIC"),
        )

    def text_to_date(self, node: exp.Expr, date: DateFormat, context: exp.Expr | None) -> exp.Expr:
        """The format's regular expression; each token's digits its group's (the whole
        match replaced by the group), checked to be a calendar day."""
        pattern = exp.Literal.string(date.pattern)
        groups = date.groups()
        digits = {
            token: self.template(
                f"regexp_replace(:x, :re, '\\{groups[token]}')", x=node, re=pattern
            )
            for token in DATE_TOKENS
        }
        y, m, d = (self.template("CAST(:s AS INTEGER)", s=digits[t]) for t in DATE_TOKENS)
        days = self.template(_DAYS, y=y, m=m)
        valid = self.template(
            ":y >= 1 AND :m BETWEEN 1 AND 12 AND :d BETWEEN 1 AND :n", y=y, m=m, d=d, n=days
        )
        iso = self.template(
            ":y || '-' || lpad(:m, 2, '0') || '-' || lpad(:d, 2, '0')",
            y=digits["YYYY"],
            m=digits["MM"],
            d=digits["DD"],
        )
        return self.template(
            "CASE WHEN :x IS NULL THEN NULL WHEN NOT :x ~ :re THEN :unfit"
            " WHEN NOT :valid THEN :unfit ELSE :iso END",
            x=node,
            re=pattern,
            unfit=self._failed(node, date.reason, context, "TEXT"),
            valid=valid,
            iso=iso,
        )

    def _failed(self, node: exp.Expr, reason: str, context: exp.Expr | None, kind: str) -> exp.Expr:
        """NULL under TRY_CAST (`context` None); else the failure naming the value, in
        the words of storage/sql_conversions.failure."""
        if context is None:
            return self.template(f"CAST(NULL AS {kind})")
        quote = exp.Literal.string("'")
        shown = self.template(
            f":q || replace(substr(:x, 1, {SHOWN_CHARS}), :q, :qq) || :q"
            f" || CASE WHEN length(:x) > {SHOWN_CHARS} THEN '...' ELSE '' END",
            x=node,
            q=quote,
            qq=exp.Literal.string("''"),
        )
        return self.template(
            f"CAST(CAST(:start || :shown || :reason || :context || ')' AS INTEGER) AS {kind})",
            start=exp.Literal.string(f"{FAILED_MARK}the value "),
            shown=shown,
            reason=exp.Literal.string(f" {reason} ("),
            context=context,
        )

    def output(self, node: exp.Expr, kind: SqlType) -> exp.Expr:
        """The stored type of the output column (PostgreSQL's SUM of BIGINT is NUMERIC,
        a CASE of 1.5 and 2.25 mixes scales)."""
        if kind.kind is ColumnType.INTEGER:
            return self.template("CAST(:x AS BIGINT)", x=node)
        if kind.kind is ColumnType.DECIMAL and not may_pass_int64(node):
            return self.template(f"CAST(:x AS {PG_NUMERIC.format(scale=kind.scale)})", x=node)
        if kind.kind is ColumnType.DECIMAL:
            # The stored forms' bound (decision 0001): past it the BIGINT cast fails.
            unit, bound = 10**kind.scale, Decimal(INT64_MAX).scaleb(-kind.scale)
            numeric = PG_NUMERIC.format(scale=kind.scale)
            return self.template(
                f"CAST(CASE WHEN abs(:x) > {bound} THEN CAST(:x * {unit} AS BIGINT) ELSE :x END"
                f" AS {numeric})",
                x=node,
            )
        if kind.kind in (ColumnType.TEXT, ColumnType.DATE):  # a NULL too: TEXT, then
            # byte order, as ORDER BY may name the output
            return self.template('CAST(:x AS TEXT) COLLATE "C"', x=node)
        if kind.kind is ColumnType.BOOLEAN:
            return self.template("CAST(:x AS BOOLEAN)", x=node)
        return self.template(
            f"CAST(:x AS {'TIMESTAMPTZ' if kind.timezone else 'TIMESTAMP'})", x=node
        )
