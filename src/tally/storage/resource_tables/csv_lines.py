"""Rows rendered to their CSV line by the database: a CSV export reads one string a row.

The line is the one Python's `csv` writer makes of the row's values' texts (RFC 4180,
minimal quoting): a field holding a quote, a comma, a carriage return or a line feed is
quoted, its quotes doubled; a missing value is empty, as is an empty text; a row of one
field that is empty is `""`, so that it is not a blank line. Only a text can hold those
characters: every other type's text (digits, ISO dates and times, `true`/`false`) is
written as it is. Read as ten values a row, a 1M-row export spent 4.3 µs a row building
Python objects and 2.2 µs quoting them; a line costs the database about what the values'
texts did, and Python one object (docs/benchmarks.md, "The console").
"""

from __future__ import annotations

from collections.abc import Sequence

from tally.core.columns import Column, ColumnType
from tally.storage.resource_tables.row_json import text_value_sql

# A text needing quotes: it holds a quote, a comma, a CR or an LF. SQLite's GLOB takes
# the two control characters as they are inside the literal; PostgreSQL's regular
# expression reads `\r` and `\n` (standard_conforming_strings keeps the backslashes).
SQLITE_NEEDS_QUOTES = "'*[\",\r\n]*'"
PG_NEEDS_QUOTES = "'[\",\\r\\n]'"
EMPTY = "''"  # a missing value among others
EMPTY_ALONE = "'\"\"'"  # the only field of its row, missing: `""`


def csv_line_sql(fields: Sequence[Column], prefix: str, *, postgresql: bool) -> str:
    """SQL text giving a row's CSV line (no line end) of `fields`, stored as
    `{prefix}{physical}`. The concatenation is a balanced tree, not a chain: SQLite
    limits an expression's depth (1000), and a chain of 500 columns would pass it."""
    single = len(fields) == 1
    return _joined([_field(c, f"{prefix}{c.physical}", postgresql, single) for c in fields])


def _field(column: Column, ref: str, postgresql: bool, single: bool) -> str:
    """One field's text as the line holds it, never NULL."""
    text = text_value_sql(column, ref, postgresql=postgresql)
    if column.type is ColumnType.TEXT:
        if postgresql:
            needs_quotes = f"{ref} ~ {PG_NEEDS_QUOTES}"
        else:
            needs_quotes = f"{ref} GLOB {SQLITE_NEEDS_QUOTES}"
        quoted = f"'\"' || replace({ref}, '\"', '\"\"') || '\"'"
        text = f"CASE WHEN {needs_quotes} THEN {quoted} ELSE {ref} END"
        if single:
            text = f"NULLIF({text}, '')"  # an empty text is written as a missing value
    return f"COALESCE({text}, {EMPTY_ALONE if single else EMPTY})"


def _joined(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    return f"({_joined(parts[:half])} || ',' || {_joined(parts[half:])})"
