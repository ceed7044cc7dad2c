"""Functions every SQLite connection gets, for the SQL transformations translate to:
regular expressions with PostgreSQL's meaning (`~`, REGEXP_REPLACE's first match,
REGEXP_SUBSTR), which SQLite lacks (NULL in, NULL out, as on PostgreSQL), and the
failure of a number that left int64, whose message `raised_message` keeps for the
run's error (sqlite3 would say only "user-defined function raised exception")."""

from __future__ import annotations

import re
import sqlite3
import threading

_REPLACEMENT_WHOLE = re.compile(r"\\&")  # PostgreSQL's "the whole match"


def _like(text: str | None, pattern: str | None) -> bool | None:
    if text is None or pattern is None:
        return None
    return re.search(pattern, text) is not None


def _substr(text: str | None, pattern: str | None) -> str | None:
    if text is None or pattern is None:
        return None
    match = re.search(pattern, text)
    return None if match is None else match.group(0)


def _replace(text: str | None, pattern: str | None, replacement: str | None) -> str | None:
    if text is None or pattern is None or replacement is None:
        return None
    return re.sub(pattern, _REPLACEMENT_WHOLE.sub(r"\\g<0>", replacement), text, count=1)


class IntegerOverflowError(ValueError):
    """A transformation's number exceeds 64-bit integers (SQLite made it a float). Not
    an OverflowError: sqlite3 reports that one as "string or blob too big"."""


# sqlite3 reports a function's exception as "user-defined function raised exception",
# its message lost: the function leaves it here, on the thread whose statement called it.
_raised = threading.local()


def raised_message() -> str | None:
    """The message of the exception a function last raised on this thread (taken: the
    next failure of a statement reads only its own)."""
    message: str | None = getattr(_raised, "message", None)
    _raised.message = None
    return message


OVERFLOW = "a value exceeds 64-bit integers"  # on PostgreSQL too (transformation_sql)


def _overflow(value: float) -> None:
    _raised.message = f"{OVERFLOW} (about {value:.4g})"
    raise IntegerOverflowError(_raised.message)


def register_sql_functions(connection: sqlite3.Connection) -> None:
    connection.create_function("tally_regexp_like", 2, _like, deterministic=True)
    connection.create_function("tally_regexp_substr", 2, _substr, deterministic=True)
    connection.create_function("tally_regexp_replace", 3, _replace, deterministic=True)
    connection.create_function("tally_overflow", 1, _overflow)
