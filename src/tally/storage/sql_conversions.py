"""Text read as a number or a date by a transformation (CAST, TRY_CAST, `parse_decimal`,
`to_date`): the one grammar both backends follow, as regular expressions that Python's
`re` and PostgreSQL's read alike (the PostgreSQL forms match them in SQL, the SQLite
functions of storage/sql_functions.py call the readers here), and the failures' words.

A number: ASCII whitespace around it, an optional sign, digits (grouped by threes with
the thousands separator, or not grouped at all), and a fraction after the decimal
separator; no exponent, NaN or infinity. It is rounded half away from zero to the
target's scale (PostgreSQL's rounding of NUMERIC), exactly, in integers; past int64
scaled, or past MAX_NUMBER_CHARS, it does not fit. A date: the format's tokens
`YYYY`, `MM`, `DD` between the separators it names, a real calendar day of years
0001-9999; `DD` and `MM` take one or two digits where a separator or the end follows
them (`1/5/2026`), two where a token does (`YYYYMMDD`); whitespace around it too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tally.core.columns import INT64_MAX

WHITESPACE = " \t\n\r\f\v"
_SPACE = "[ \\t\\n\\r\\f\\v]*"
# Each separator as a regular expression both Python and PostgreSQL read as itself.
DECIMAL_SEPARATORS = {".": "\\.", ",": ","}
THOUSANDS_SEPARATORS = {
    "": "",
    ".": "\\.",
    ",": ",",
    " ": " ",
    "'": "'",
    "\u00a0": "\u00a0",  # no-break space (French exports)
    "\u202f": "\u202f",  # narrow no-break space
}
# A space among the thousands separators stands for all three a French export may mix
# (space, no-break space, narrow no-break space), as it does in a declared column's format.
SPACES = (" ", "\u00a0", "\u202f")
_ANY_SPACE = "[" + "".join(SPACES) + "]"
DATE_TOKENS = ("YYYY", "MM", "DD")
DATE_SEPARATORS = {"/": "/", "-": "-", ".": "\\.", ",": ",", ":": ":", " ": " "}
SHOWN_CHARS = 100  # of a value, in a failure
# A number's text longer than this is out of range, whatever its digits (PostgreSQL's
# NUMERIC and Python's int() have limits of their own, far above any int64's digits).
MAX_NUMBER_CHARS = 1000

NOT_A_NUMBER = "is not a decimal number"
NOT_WHOLE = "is not a whole number"
OUT_OF_RANGE = "is out of range"


class ConversionError(ValueError):
    """A value that does not fit: its reason (NOT_A_NUMBER, ...)."""


def shown(value: str) -> str:
    """The value as a failure quotes it (its start, when long): what the PostgreSQL
    forms write in SQL too."""
    quoted = "'" + value[:SHOWN_CHARS].replace("'", "''") + "'"
    return quoted + ("..." if len(value) > SHOWN_CHARS else "")


def failure(value: str, reason: str, context: str) -> str:
    """The words of a value that does not fit, on both backends."""
    return f"the value {shown(value)} {reason} ({context})"


@dataclass(frozen=True)
class NumberFormat:
    """`decimal` None: a whole number (CAST to an integer)."""

    decimal: str | None = "."
    thousands: str = ""

    def __post_init__(self) -> None:
        if self.decimal is not None and self.decimal not in DECIMAL_SEPARATORS:
            raise ValueError(f"the decimal separator must be one of {_listed(DECIMAL_SEPARATORS)}")
        if self.thousands not in THOUSANDS_SEPARATORS:
            raise ValueError(
                f"the thousands separator must be one of {_listed(THOUSANDS_SEPARATORS)}"
            )
        if self.thousands and self.thousands == self.decimal:
            raise ValueError("the decimal and thousands separators must differ")

    @property
    def thousands_written(self) -> tuple[str, ...]:
        """The characters the thousands separator is written as (a space: any of three)."""
        if self.thousands in SPACES:
            return SPACES
        return (self.thousands,) if self.thousands else ()

    @property
    def pattern(self) -> str:
        """The whole text, anchored (`^...$`)."""
        whole = "[0-9]+"
        if self.thousands:
            separator = (
                _ANY_SPACE if self.thousands in SPACES else THOUSANDS_SEPARATORS[self.thousands]
            )
            whole = f"([0-9]{{1,3}}({separator}[0-9]{{3}})+|[0-9]+)"
        body = whole
        if self.decimal is not None:
            point = DECIMAL_SEPARATORS[self.decimal]
            body = f"({whole}({point}[0-9]*)?|{point}[0-9]+)"
        return f"^{_SPACE}[+-]?{body}{_SPACE}$"

    def plain(self, text: str) -> str:
        """A text matching `pattern` as `[-]digits[.digits]`."""
        text = text.strip(WHITESPACE)
        for separator in self.thousands_written:
            text = text.replace(separator, "")
        if self.decimal is not None and self.decimal != ".":
            text = text.replace(self.decimal, ".")
        return text

    def read(self, text: str, scale: int) -> int:
        """The value scaled by 10**scale, rounded half away from zero; ConversionError."""
        if re.match(self.pattern, text) is None:
            raise ConversionError(NOT_A_NUMBER if self.decimal is not None else NOT_WHOLE)
        if len(text) > MAX_NUMBER_CHARS:
            raise ConversionError(OUT_OF_RANGE)
        plain = self.plain(text)
        negative = plain.startswith("-")
        whole, _, fraction = plain.lstrip("+-").partition(".")
        digits = int((whole or "0") + fraction[:scale].ljust(scale, "0"))
        if fraction[scale : scale + 1] >= "5":  # the next digit: half or more, away
            digits += 1
        if digits > INT64_MAX:
            raise ConversionError(OUT_OF_RANGE)
        return -digits if negative else digits


WHOLE_NUMBER = NumberFormat(decimal=None)
DECIMAL_NUMBER = NumberFormat()


@dataclass(frozen=True)
class DateFormat:
    """A date's format in PostgreSQL's tokens (`DD/MM/YYYY`): `pieces` the tokens and
    separators in order."""

    pieces: tuple[str, ...]
    flexible: bool = True  # DD and MM take one digit where a separator or the end follows

    @classmethod
    def parse(cls, written: str, *, flexible: bool = True) -> DateFormat:
        """ValueError naming what the format may hold."""
        pieces: list[str] = []
        rest = written
        while rest:
            token = next((t for t in DATE_TOKENS if rest.startswith(t)), None)
            if token is None and rest[0] not in DATE_SEPARATORS:
                raise ValueError(_DATE_FORMAT_RULE)
            piece = token or rest[0]
            pieces.append(piece)
            rest = rest[len(piece) :]
        if sorted(p for p in pieces if p in DATE_TOKENS) != sorted(DATE_TOKENS):
            raise ValueError(_DATE_FORMAT_RULE)
        return cls(tuple(pieces), flexible)

    @property
    def written(self) -> str:
        return "".join(self.pieces)

    @property
    def pattern(self) -> str:
        """The whole text, anchored, a group for each token (`groups`)."""
        out = []
        for index, piece in enumerate(self.pieces):
            following = self.pieces[index + 1] if index + 1 < len(self.pieces) else None
            if piece == "YYYY":
                out.append("([0-9]{4})")
            elif piece in DATE_TOKENS:
                short = self.flexible and following not in DATE_TOKENS
                out.append("([0-9]{1,2})" if short else "([0-9]{2})")
            else:
                out.append(DATE_SEPARATORS[piece])
        return f"^{_SPACE}{''.join(out)}{_SPACE}$"

    def groups(self) -> dict[str, int]:
        """Each token's group in `pattern`, from 1."""
        tokens = [p for p in self.pieces if p in DATE_TOKENS]
        return {token: tokens.index(token) + 1 for token in DATE_TOKENS}

    def read(self, text: str) -> str:
        """The date as ISO text (YYYY-MM-DD); ConversionError."""
        match = re.match(self.pattern, text)
        if match is None:
            raise ConversionError(self.reason)
        at = self.groups()
        year, month, day = (int(match.group(at[t])) for t in DATE_TOKENS)
        if not (year >= 1 and 1 <= month <= 12 and 1 <= day <= days_in_month(year, month)):
            raise ConversionError(self.reason)
        return f"{year:04d}-{month:02d}-{day:02d}"

    @property
    def reason(self) -> str:
        return f"is not a date in the format {self.written}"


ISO_DATE = DateFormat(("YYYY", "-", "MM", "-", "DD"), flexible=False)
_DATE_FORMAT_RULE = (
    "a date format holds YYYY, MM and DD once each, between the separators "
    + " ".join(f"'{s}'" for s in DATE_SEPARATORS)
)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _listed(separators: dict[str, str]) -> str:
    return ", ".join(repr(s) for s in separators)
