"""What a transformation's SQL may contain: every node of its parsed tree must be of one
of these sqlglot classes (docs/transformations.md has an example of each). Anything
else, every function not named here above all, is rejected by name."""

from __future__ import annotations

from sqlglot import exp

# The shape of a query: one SELECT with CTEs, joins, set operations and subqueries.
STRUCTURE: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Select,
        exp.Union,
        exp.Except,
        exp.Intersect,
        exp.With,
        exp.CTE,
        exp.From,
        exp.Join,
        exp.Table,
        exp.TableAlias,
        exp.Subquery,
        exp.Where,
        exp.Group,
        exp.Having,
        exp.Order,
        exp.Ordered,
        exp.Limit,
        exp.Offset,
        exp.Distinct,
        exp.Window,
        exp.WindowSpec,
        exp.Column,
        exp.Identifier,
        exp.Alias,
        exp.Star,
        exp.Paren,
        exp.Literal,
        exp.Boolean,
        exp.Null,
        exp.DataType,
        exp.DataTypeParam,
        exp.Var,
        exp.If,  # a CASE's WHEN ... THEN (`IF(c, a, b)` itself is refused: dialect.py)
    }
)

# Operators and predicates.
OPERATORS: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Add,
        exp.Sub,
        exp.Mul,
        exp.Div,
        exp.Neg,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.And,
        exp.Or,
        exp.Not,
        exp.Is,
        exp.NullSafeEQ,
        exp.NullSafeNEQ,
        exp.In,
        exp.Between,
        exp.Like,
        exp.ILike,
        exp.Escape,
        exp.Exists,
        exp.Case,
        exp.Cast,
        exp.TryCast,
        exp.DPipe,
        exp.RegexpLike,
        exp.Extract,
        exp.Interval,
    }
)

# Functions, by the class sqlglot parses each into.
FUNCTIONS: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.Lower,
        exp.Upper,
        exp.Trim,
        exp.Substring,
        exp.Replace,
        exp.Length,
        exp.Concat,
        exp.RegexpReplace,
        exp.RegexpSubstr,
        exp.Coalesce,
        exp.Nullif,
        exp.Abs,
        exp.Round,
        exp.TimestampTrunc,
        exp.StrToDate,  # to_date(text, format)
        exp.CurrentDate,
        exp.Count,
        exp.Sum,
        exp.Min,
        exp.Max,
        exp.Avg,
        exp.RowNumber,
        exp.Rank,
        exp.DenseRank,
        exp.Ntile,
        exp.Lag,
        exp.Lead,
        exp.FirstValue,
        exp.LastValue,
    }
)

ALLOWED: frozenset[type[exp.Expr]] = STRUCTURE | OPERATORS | FUNCTIONS
# Functions sqlglot does not know (it parses them as exp.Anonymous), by name.
NAMED_FUNCTIONS = frozenset({"parse_decimal"})


def is_allowed(node: exp.Expr) -> bool:
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in NAMED_FUNCTIONS
    return type(node) in ALLOWED


# EXTRACT's parts and DATE_TRUNC's units.
DATE_PARTS = frozenset({"YEAR", "QUARTER", "MONTH", "DAY", "DOW", "HOUR", "MINUTE"})
TRUNC_UNITS = frozenset({"YEAR", "MONTH", "DAY"})
# INTERVAL units, in seconds (months and years: the backends count them differently).
INTERVAL_SECONDS = {"DAY": 86400, "HOUR": 3600, "MINUTE": 60, "SECOND": 1}
