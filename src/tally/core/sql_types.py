"""The types of a transformation's expressions: tally's column types, a decimal's scale,
a timestamp's offset flag, and the rules that combine them (docs/transformations.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tally.core.columns import Column, ColumnType

MAX_SCALE = 18  # more fractional digits than any int64 amount can usefully carry


@dataclass(frozen=True)
class SqlType:
    """`kind` None is the type of NULL, which takes any other type. A decimal of scale 0
    is an integer (`decimal_of`)."""

    kind: ColumnType | None
    scale: int = 0
    timezone: bool = False

    @property
    def is_numeric(self) -> bool:
        return self.kind in (ColumnType.INTEGER, ColumnType.DECIMAL)

    @property
    def is_null(self) -> bool:
        return self.kind is None

    def describe(self) -> str:
        if self.kind is None:
            return "NULL"
        if self.kind is ColumnType.DECIMAL:
            return f"decimal({self.scale})"
        if self.kind is ColumnType.TIMESTAMP and self.timezone:
            return "timestamp with offsets"
        return str(self.kind)


NULL = SqlType(None)
TEXT = SqlType(ColumnType.TEXT)
INTEGER = SqlType(ColumnType.INTEGER)
BOOLEAN = SqlType(ColumnType.BOOLEAN)
DATE = SqlType(ColumnType.DATE)


def decimal_of(scale: int) -> SqlType:
    return SqlType(ColumnType.DECIMAL, scale) if scale else INTEGER


def timestamp_of(*, timezone: bool) -> SqlType:
    return SqlType(ColumnType.TIMESTAMP, timezone=timezone)


def of_column(column: Column) -> SqlType:
    if column.type is ColumnType.DECIMAL:
        return decimal_of(column.scale)
    if column.type is ColumnType.TIMESTAMP:
        return timestamp_of(timezone=column.timezone)
    return SqlType(column.type)


def unify(left: SqlType, right: SqlType) -> SqlType | None:
    """The type two values share where either may be the result (CASE, COALESCE, UNION
    ALL, comparisons), or None when they share none. Numbers meet at the larger scale."""
    if left.is_null:
        return right
    if right.is_null or left == right:
        return left
    if left.is_numeric and right.is_numeric:
        return decimal_of(max(left.scale, right.scale))
    return None
