"""Functions every SQLite connection gets, for the SQL transformations translate to:
regular expressions with PostgreSQL's meaning (`~`, REGEXP_REPLACE's first match,
REGEXP_SUBSTR), which SQLite lacks (NULL in, NULL out, as on PostgreSQL), text read as
a number or a date (storage/sql_conversions.py), text lowered by Unicode's case mapping
(`tally_lower`, for `resource_tables.text_search`), and the failures of a number that left
int64 or of a text that does not convert, whose message the budget keeps for the run's
error.

The expressions run on RE2 (google-re2), never Python's backtracking `re`: a call inside
a SQLite statement cannot be interrupted (the progress handler runs between the virtual
machine's steps, not within a function), so each must end soon whatever the pattern.
RE2 is linear in the text, but its factor grows with the pattern's compiled program (and
with its groups, when they are captured): a pattern's program is bounded by
PATTERN_MEMORY, and one call's program size times text length by MATCH_BUDGET. A
pattern RE2 cannot compile (backreferences, lookaround) fails the statement, its error
naming the pattern; the check refuses such a literal pattern first (`compile_pattern`),
on both backends. Within a time limit (`time_limit` in transformation_sql.py) each call
also checks the statement's deadline, so a query calling them on many rows stops."""

from __future__ import annotations

import functools
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]

from tally.storage.sql_conversions import ConversionError, DateFormat, NumberFormat, failure

# RE2's memory for one compiled pattern (its program and DFA cache). 1 MiB compiles a
# program of ~40,000 instructions (`[a-q][^u-z]{999}x` five times over); past it RE2
# says "pattern too large". A DFA that runs out of it falls back to a slower scan: such
# a 40,000-instruction pattern over 1 MB of random text took 133 ms (measured, RE2 1.1).
PATTERN_MEMORY = 1 << 20
# One call's program instructions x text characters. Captured groups are the costly
# case: `((.*)(.*)){1,100}q` (2,304 instructions) over 100,000 characters took 541 ms,
# ~2.3 ns per unit; this budget keeps a call under ~1 s while leaving a typical
# 20-instruction pattern 20 million characters of text.
MATCH_BUDGET = 400_000_000
_SHOWN_CHARS = 100  # of a pattern, in an error


class PatternError(ValueError):
    """A regular expression RE2 cannot run, or not within the budget: the message names
    the pattern and why."""


class SqlTimeLimitError(Exception):
    """A function was called after its statement's deadline."""


def _shown(pattern: str) -> str:
    """The pattern as an error quotes it (its start, when long)."""
    if len(pattern) > _SHOWN_CHARS:
        pattern = pattern[:_SHOWN_CHARS] + "..."
    return "'" + pattern.replace("'", "''") + "'"


def compile_pattern(pattern: str, *, groups: bool = False) -> Any:
    """The RE2 program of a PostgreSQL pattern: `.` matches a newline too (PostgreSQL's
    default, not newline-sensitive); `groups` keeps the captured groups (only a
    replacement naming them needs them: without, RE2 finds the match by its DFA alone).
    PatternError names what RE2 refuses. (re2.compile keeps the last 128 programs.)"""
    options = re2.Options()
    options.max_mem = PATTERN_MEMORY
    options.log_errors = False  # the error is raised, not written to stderr
    options.dot_nl = True
    options.never_capture = not groups
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0].decode("utf-8", "replace") if error.args else str(error)
        if "too large" in reason:
            raise PatternError(
                f"the regular expression {_shown(pattern)} is too large: its compiled form "
                f"needs more than {PATTERN_MEMORY >> 20} MiB"
            ) from None
        if reason.startswith(("invalid escape sequence", "invalid perl operator")):
            reason += " (backreferences such as \\1 and lookaround such as (?= are not supported)"
        raise PatternError(f"invalid regular expression {_shown(pattern)}: {reason}") from None


class ConversionFailedError(ValueError):
    """A text a transformation converts does not fit (its message names the value)."""


class IntegerOverflowError(ValueError):
    """A transformation's number exceeds 64-bit integers (SQLite made it a float). Not
    an OverflowError: sqlite3 reports that one as "string or blob too big"."""


OVERFLOW = "a value exceeds 64-bit integers"  # on PostgreSQL too (transformation_sql)


@dataclass
class FunctionBudget:
    """What the functions of one connection may spend, and why they last stopped: a
    pattern refused, a number past int64 (the statement's error says only "user-defined
    function raised exception")."""

    deadline: float | None = None  # time.monotonic() past which a call fails
    failure: str | None = None

    def compiled(self, pattern: str, text: str, *, groups: bool = False) -> Any:
        """The pattern's program, if the call may run within the deadline and the budget."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise SqlTimeLimitError()
        try:
            program = compile_pattern(pattern, groups=groups)
            if program.programsize * len(text) > MATCH_BUDGET:
                raise PatternError(
                    f"the regular expression {_shown(pattern)} is too costly over a text of "
                    f"{len(text):,} characters: its program ({program.programsize:,} "
                    f"instructions) times the text's length exceeds {MATCH_BUDGET:,}"
                )
        except PatternError as error:
            self.failure = str(error)
            raise
        return program

    def overflow(self, value: float) -> None:
        """The failure of a number that left int64 (SQLite made it a float)."""
        self.failure = f"{OVERFLOW} (about {value:.4g})"
        raise IntegerOverflowError(self.failure)

    def to_number(
        self,
        text: str | None,
        scale: int,
        decimal: str | None,
        thousands: str,
        context: str | None,
    ) -> int | None:
        """The text as a scaled integer (`decimal` None: a whole number); one that does
        not fit fails the statement naming it, or is NULL when `context` is (TRY)."""
        if text is None:
            return None
        try:  # (a text column's value is text; str() in case SQLite gave it a number)
            return _number_format(decimal, thousands).read(str(text), scale)
        except ConversionError as error:
            self._not_converted(str(text), str(error), context)
            return None

    def to_date(
        self, text: str | None, written: str, flexible: int, context: str | None
    ) -> str | None:
        """The text as an ISO date read with the format `written` (as to_number)."""
        if text is None:
            return None
        try:
            return _date_format(written, bool(flexible)).read(str(text))
        except ConversionError as error:
            self._not_converted(str(text), str(error), context)
            return None

    def _not_converted(self, text: str, reason: str, context: str | None) -> None:
        """Fails the statement naming the value, unless under TRY (`context` None)."""
        if context is None:
            return
        self.failure = failure(text, reason, context)
        raise ConversionFailedError(self.failure)

    def like(self, text: str | None, pattern: str | None) -> bool | None:
        if text is None or pattern is None:
            return None
        return self.compiled(pattern, text).search(text) is not None

    def substr(self, text: str | None, pattern: str | None) -> str | None:
        if text is None or pattern is None:
            return None
        match = self.compiled(pattern, text).search(text)
        return None if match is None else str(match.group(0))

    def replace(self, text: str | None, pattern: str | None, replacement: str | None) -> str | None:
        if text is None or pattern is None or replacement is None:
            return None
        pieces = _replacement_pieces(replacement)
        groups = any(isinstance(piece, int) and piece > 0 for piece in pieces)
        match = self.compiled(pattern, text, groups=groups).search(text)
        if match is None:
            return text
        parts = []
        for piece in pieces:
            if isinstance(piece, str):
                parts.append(piece)
            elif piece <= len(match.groups()):
                parts.append(match.group(piece) or "")
        return text[: match.start()] + "".join(parts) + text[match.end() :]


@functools.lru_cache(maxsize=64)
def _number_format(decimal: str | None, thousands: str) -> NumberFormat:
    return NumberFormat(decimal, thousands)


@functools.lru_cache(maxsize=64)
def _date_format(written: str, flexible: bool) -> DateFormat:
    return DateFormat.parse(written, flexible=flexible)


def _replacement_pieces(replacement: str) -> tuple[str | int, ...]:
    """PostgreSQL's replacement text: `\\1`..`\\9` a group (nothing past the pattern's
    groups), `\\&` the whole match (0), `\\\\` one backslash; any other backslash is
    itself (not Python's escapes)."""
    pieces: list[str | int] = []
    text: list[str] = []
    index = 0
    while index < len(replacement):
        char, following = replacement[index], replacement[index + 1 : index + 2]
        if char == "\\" and following and following in "123456789&":
            pieces.append("".join(text))
            text = []
            pieces.append(0 if following == "&" else int(following))
            index += 2
        elif char == "\\" and following == "\\":
            text.append("\\")
            index += 2
        else:
            text.append(char)
            index += 1
    pieces.append("".join(text))
    return tuple(pieces)


def register_sql_functions(
    connection: sqlite3.Connection, budget: FunctionBudget | None = None
) -> None:
    """The functions, spending `budget` (a fresh one, without a deadline, by default);
    registered again with a statement's budget by `time_limit`."""
    budget = budget or FunctionBudget()
    connection.create_function("tally_regexp_like", 2, budget.like, deterministic=True)
    connection.create_function("tally_regexp_substr", 2, budget.substr, deterministic=True)
    connection.create_function("tally_regexp_replace", 3, budget.replace, deterministic=True)
    connection.create_function("tally_overflow", 1, budget.overflow)
    connection.create_function("tally_to_number", 5, budget.to_number, deterministic=True)
    connection.create_function("tally_to_date", 4, budget.to_date, deterministic=True)
    connection.create_function("tally_lower", 1, _lower, deterministic=True)


def _lower(text: str | None) -> str | None:
    """Text lowered by Unicode's case mapping (SQLite's own `lower` maps ASCII only): the
    case-insensitive text search of `resource_tables.text_search`."""
    return None if text is None else text.lower()
