"""Each typed operation as SQL for one backend (`sqlite`, `postgresql`), over
tally's stored forms: on SQLite a decimal is an integer scaled by 10**scale and a
timestamp canonical ISO text; on PostgreSQL both are its own types (NUMERIC,
TIMESTAMP[TZ]). Dates are ISO text on both.

Both backends compute every rounding exactly in integers (half away from zero, as
PostgreSQL's ROUND on NUMERIC), so they agree digit for digit; no float holds a value.
"""

from __future__ import annotations

import functools
import re
from abc import ABC, abstractmethod

import sqlglot
from sqlglot import exp

from tally.core.sql_types import SqlType
from tally.storage.sql_conversions import DateFormat, NumberFormat

ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
POSITION_KEYS = ("line", "col", "start", "end")  # sqlglot's meta of a parsed token
_ATOMS = (exp.Column, exp.Literal, exp.Paren, exp.Func, exp.Null, exp.Boolean, exp.Case)


def ascii_lower(text: str) -> str:
    """ASCII letters in lower case, every other character as it is (tally's `lower`)."""
    return text.translate(str.maketrans(ASCII_UPPER, ASCII_UPPER.lower()))


def atom(node: exp.Expr) -> exp.Expr:
    """The node, in parentheses unless it is one token or call (sqlglot's AND and OR
    are calls too, but not atoms: `NOT :x` of `a AND b`)."""
    if isinstance(node, _ATOMS) and not isinstance(node, exp.Connector):
        return node
    return exp.Paren(this=node)


def may_pass_int64(node: exp.Expr) -> bool:
    """Whether arithmetic could take the value past the stored forms' int64 bound (a
    column, a literal or a COUNT cannot)."""
    return node.find(exp.Add, exp.Sub, exp.Mul, exp.Sum, exp.Neg, exp.Abs) is not None


@functools.lru_cache(maxsize=256)
def _parsed(sql: str, dialect: str) -> exp.Expr:
    tree = sqlglot.parse_one(sql, read=dialect)
    if isinstance(tree, exp.Command):  # sqlglot gave up on a template: a bug of ours
        raise ValueError(f"template not parsed: {sql}")
    for node in tree.walk():  # positions in the template, not in the user's SQL
        for key in POSITION_KEYS:
            node.meta.pop(key, None)
    return tree


class Forms(ABC):
    """The operations both backends write alike; subclasses write the rest."""

    dialect = ""
    trim_both = "trim"  # the function that trims both ends

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
        """`pattern` escapes with a backslash (`like_pattern` made it so)."""
        return self.template(":x LIKE :p", x=node, p=exp.Literal.string(pattern))

    def trim(self, node: exp.Expr, chars: exp.Expr | None, side: str) -> exp.Expr:
        name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(side, self.trim_both)
        if chars is None:
            return self.template(f"{name}(:x)", x=node)
        return self.template(f"{name}(:x, :c)", x=node, c=chars)

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
    def shift_timestamp(self, node: exp.Expr, seconds: int) -> exp.Expr: ...
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
    def text_to_number(
        self, node: exp.Expr, scale: int, number: NumberFormat, context: exp.Expr | None
    ) -> exp.Expr:
        """The text as a decimal of `scale` (storage/sql_conversions.py); one that does
        not fit fails the statement, its message naming the value and `context` (a text:
        where in the SQL, which row), or is NULL where `context` is None (TRY_CAST)."""

    @abstractmethod
    def text_to_date(self, node: exp.Expr, date: DateFormat, context: exp.Expr | None) -> exp.Expr:
        """The text as an ISO date read with `date`, as `text_to_number`."""

    @abstractmethod
    def output(self, node: exp.Expr, kind: SqlType) -> exp.Expr: ...


def like_pattern(pattern: str, escape: str) -> str:
    """A LIKE pattern whose escape character is `escape` ("" for none) written with a
    backslash as its escape (PostgreSQL's default, which both backends' forms read);
    ValueError for a pattern that ends with its escape character, as PostgreSQL's."""
    out, chars = [], iter(pattern)
    for char in chars:
        if escape and char == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise ValueError("ends with its escape character")
            out.append("\\" + escaped)
        elif char == "\\":
            out.append("\\\\")
        else:
            out.append(char)
    return "".join(out)


def like_to_regexp(pattern: str) -> str:
    """A LIKE pattern (backslash escapes, as `like_pattern` writes it) as a whole-text
    regular expression."""
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
    return "(?s)\\A" + "".join(out) + "\\z"  # RE2's end of text (storage/sql_functions.py)
