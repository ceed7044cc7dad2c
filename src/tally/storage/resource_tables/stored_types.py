"""Stored-type adapters: a value bound to or read from a row table in the stored form the
rest of tally sees on both backends (SQLite's), while PostgreSQL keeps decimals and
timestamps in its own types (NUMERIC, TIMESTAMP[TZ]), which its COPY parses from a
file's text."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.columns import Column, ColumnType, canonical_timestamp


class _StoredForm(sa.types.TypeDecorator[Any]):
    """A value in the stored form the rest of tally sees on both backends, which is what
    SQLite keeps; PostgreSQL keeps its own type (`pg_type`), translated here both ways.
    (SQLAlchemy reads `impl` and `cache_ok` from each subclass's own body.)"""

    def pg_type(self) -> sa.types.TypeEngine[Any]:
        raise NotImplementedError

    def sqlite_type(self) -> sa.types.TypeEngine[Any]:
        raise NotImplementedError

    def to_pg(self, value: Any) -> Any:
        raise NotImplementedError

    def from_pg(self, value: Any) -> Any:
        raise NotImplementedError

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        postgresql = dialect.name == "postgresql"
        return dialect.type_descriptor(self.pg_type() if postgresql else self.sqlite_type())

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> Any:
        return value if value is None or dialect.name != "postgresql" else self.to_pg(value)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> Any:
        return value if value is None or dialect.name != "postgresql" else self.from_pg(value)


class _StoredDecimal(_StoredForm):
    """An integer scaled by 10**scale; on PostgreSQL the exact NUMERIC (Decimal.scaleb
    only moves the exponent: exact)."""

    impl = sa.BigInteger
    cache_ok = True

    def __init__(self, scale: int) -> None:
        super().__init__()
        self.scale = scale

    def pg_type(self) -> sa.types.TypeEngine[Any]:
        return sa.Numeric(asdecimal=True)

    def sqlite_type(self) -> sa.types.TypeEngine[Any]:
        return sa.BigInteger()

    def to_pg(self, value: Any) -> Any:
        return Decimal(value).scaleb(-self.scale)

    def from_pg(self, value: Any) -> Any:
        return int(Decimal(value).scaleb(self.scale))


class _StoredTimestamp(_StoredForm):
    """Canonical ISO text (UTC for a column with offsets); on PostgreSQL TIMESTAMP or
    TIMESTAMPTZ."""

    impl = sa.Text
    cache_ok = True

    def __init__(self, timezone: bool) -> None:
        super().__init__()
        self.timezone = timezone

    def pg_type(self) -> sa.types.TypeEngine[Any]:
        return sa.DateTime(timezone=self.timezone)

    def sqlite_type(self) -> sa.types.TypeEngine[Any]:
        return sa.Text()

    def to_pg(self, value: Any) -> Any:
        moment = dt.datetime.fromisoformat(value)
        return moment.replace(tzinfo=dt.UTC) if self.timezone else moment

    def from_pg(self, value: Any) -> Any:
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return canonical_timestamp(value.isoformat())[0]


def bind_type(column: Column) -> sa.types.TypeEngine[Any]:
    """The type values bound against this column travel as. PostgreSQL casts each
    bound value, and an IN list otherwise takes its cast from its first value:
    `IN (5::INTEGER, 9223372036854775807::INTEGER)` fails."""
    if column.type is ColumnType.DECIMAL:
        return _StoredDecimal(column.scale)
    if column.type is ColumnType.INTEGER:
        return sa.BigInteger()
    if column.type is ColumnType.TIMESTAMP:
        return _StoredTimestamp(column.timezone)
    if column.type is ColumnType.BOOLEAN:
        return sa.Boolean()
    return sa.Text()


def stored_value(conn: Connection, column: Column, value: Any, type_code: Any) -> Any:
    """A value read by the driver, in the stored form (`bind_type`'s result side)."""
    dialect = conn.dialect
    processor = bind_type(column).dialect_impl(dialect).result_processor(dialect, type_code)
    return value if processor is None else processor(value)
