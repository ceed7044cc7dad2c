"""A transformation's translated SELECT run as written (services/transformations builds
it; no parameters are bound to it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from tally.storage.engine import backend_of


def driver_text(conn: Connection, sql: str) -> str:
    """The statement for `exec_driver_sql`: psycopg reads `%` as the start of a
    placeholder everywhere, string literals included, so it is doubled there."""
    return sql.replace("%", "%%") if backend_of(conn).is_postgresql else sql


def fetch_query_rows(conn: Connection, sql: str) -> Sequence[Sequence[Any]]:
    """Every row of the SELECT, its values in the backend's stored forms."""
    return conn.exec_driver_sql(driver_text(conn, sql)).all()
