"""How a source's files are laid out (issue 32): leading lines to skip before the header,
trailing summary lines to skip, and per declared column the format its values are
written in: a date's or timestamp's token format (`DD/MM/YYYY`, `YYYYMMDD`,
`DD.MM.YYYY HH:mm:ss`), a number's decimal and thousands separators and the negative
forms it may use (`-12.50`, `12.50-`, `(12.50)`, `12.50 DR`).

Pure code. A format compiles into one regular expression, matched over a batch's values
joined by newlines (C speed), and a few substitutions over the same text that rewrite
them into the canonical text the loader reads for clean files (`2026-10-01`,
`-3445.63`): no value ever goes through a binary float, and the rest of the load
(checks, scaled integers, the conversion in SQL) is the clean file's.

Date tokens: `YYYY` (four digits), `MM` / `DD` (two digits), `M` / `D` (one or two),
`HH` (two digits, 00-23), `H` (one or two), `mm` (minutes), `ss` (seconds); between
them the literals `/ . - : , T` and space. A format holds a year, a month and a day,
and for a time hours and minutes (seconds optional); a one-or-two-digit token is followed
by a literal or ends the format.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import re2  # type: ignore[import-untyped]

DATE_FORMAT_MAX_CHARS = 40
DATE_LITERALS = frozenset("/.-:, T")
NEGATIVE_FORMS = ("minus", "trailing_minus", "parentheses", "dr_cr")
DECIMAL_SEPARATORS = (".", ",")
# "" is none. A space stands for the three spaces banks write: space, no-break space
# (U+00A0) and narrow no-break space (U+202F); either of the latter two declares the same.
THOUSANDS_SEPARATORS = ("", ",", ".", " ", "'", "\u00a0", "\u202f")
SPACES = " \u00a0\u202f"

# What a literal is in a pattern both `re` and RE2 read (RE2 refuses an escaped space).
_LITERAL = {".": "\\."}

# token -> (group name, pattern, fixed width)
_TOKENS: dict[str, tuple[str, str, bool]] = {
    "YYYY": ("y", "[0-9]{4}", True),
    "MM": ("m", "0[1-9]|1[0-2]", True),
    "DD": ("d", "0[1-9]|[12][0-9]|3[01]", True),
    "HH": ("H", "[01][0-9]|2[0-3]", True),
    "mm": ("i", "[0-5][0-9]", True),
    "ss": ("s", "[0-5][0-9]", True),
    "M": ("m", "1[0-2]|0?[1-9]", False),
    "D": ("d", "3[01]|[12][0-9]|0?[1-9]", False),
    "H": ("H", "2[0-3]|1[0-9]|0?[0-9]", False),
}
_TOKEN_ORDER = ("YYYY", "MM", "DD", "HH", "mm", "ss", "M", "D", "H")


class FormatMisfitError(ValueError):
    """A value that does not fit its column's declared format: `index` in the batch."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


@dataclass(frozen=True)
class DateFormat:
    """A parsed date format: its regular expression, whether it carries a time, and for
    a format of fixed-width tokens where each part sits (group -> (start, end))."""

    text: str
    pattern: str
    has_time: bool
    has_seconds: bool
    fixed_width: bool
    slices: tuple[tuple[str, int, int], ...] = ()


@functools.cache
def parse_date_format(text: str) -> DateFormat:
    """The format, or ValueError saying what is wrong with it."""
    if not text or len(text) > DATE_FORMAT_MAX_CHARS:
        raise ValueError(f"a format has 1 to {DATE_FORMAT_MAX_CHARS} characters")
    parts: list[str] = []
    seen: dict[str, str] = {}
    slices: list[tuple[str, int, int]] = []
    position, fixed, after_variable = 0, True, False
    while position < len(text):
        token = next((t for t in _TOKEN_ORDER if text.startswith(t, position)), None)
        if token is None:
            char = text[position]
            if char not in DATE_LITERALS:
                raise ValueError(
                    f"unknown token at position {position + 1}: {char!r} (tokens: YYYY, "
                    "MM, M, DD, D, HH, H, mm, ss; literals: / . - : , T and space)"
                )
            parts.append(_LITERAL.get(char, char))
            position += 1
            after_variable = False
            continue
        if after_variable:
            raise ValueError(f"{text[:position]!r} needs a literal before {token!r}")
        group, pattern, width_fixed = _TOKENS[token]
        if group in seen:
            raise ValueError(f"{token!r} repeats {seen[group]!r}")
        seen[group] = token
        parts.append(f"(?P<{group}>{pattern})")
        slices.append((group, position, position + len(token)))
        fixed = fixed and width_fixed
        after_variable = not width_fixed
        position += len(token)
    missing = [
        name for group, name in (("y", "YYYY"), ("m", "MM"), ("d", "DD")) if group not in seen
    ]
    if missing:
        raise ValueError(f"a format needs a year, a month and a day: {', '.join(missing)} missing")
    if ("H" in seen) != ("i" in seen) or ("s" in seen and "i" not in seen):
        raise ValueError("a time needs hours and minutes (HH:mm), seconds optional (HH:mm:ss)")
    return DateFormat(text, "".join(parts), "H" in seen, "s" in seen, fixed, tuple(slices))


@dataclass(frozen=True)
class NumberFormat:
    decimal_separator: str = "."
    thousands_separator: str = ""
    negative: tuple[str, ...] = ("minus",)


def number_format_problem(number: NumberFormat) -> tuple[str, str] | None:
    """(field, what is wrong) with a number format, or None."""
    if number.decimal_separator not in DECIMAL_SEPARATORS:
        return "decimal_separator", "must be '.' or ','"
    if number.thousands_separator not in THOUSANDS_SEPARATORS:
        return "thousands_separator", ("must be one of '', ',', '.', ' ', \"'\", U+00A0 or U+202F")
    if number.thousands_separator == number.decimal_separator:
        return "thousands_separator", "must differ from decimal_separator"
    unknown = [form for form in number.negative if form not in NEGATIVE_FORMS]
    if unknown:
        return "negative", f"unknown form {unknown[0]!r} (forms: {', '.join(NEGATIVE_FORMS)})"
    if not number.negative:
        return "negative", "name at least one form (minus: -12.50)"
    return None


@dataclass(frozen=True)
class ColumnFormat:
    """One declared column's format: `date` for a date or timestamp, else `number`."""

    date: str | None = None
    number: NumberFormat | None = None

    def to_json(self) -> dict[str, Any]:
        if self.date is not None:
            return {"format": self.date}
        number = self.number or NumberFormat()
        return {
            "decimal_separator": number.decimal_separator,
            "thousands_separator": number.thousands_separator,
            "negative": list(number.negative),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColumnFormat:
        if "format" in data:
            return cls(date=data["format"])
        return cls(
            number=NumberFormat(
                data.get("decimal_separator", "."),
                data.get("thousands_separator", ""),
                tuple(data.get("negative", ("minus",))),
            )
        )

    def describe(self) -> str:
        if self.date is not None:
            return self.date
        number = self.number or NumberFormat()
        return (
            f"decimal_separator {number.decimal_separator!r}, thousands_separator "
            f"{number.thousands_separator!r}, negative {', '.join(number.negative)}"
        )


@dataclass(frozen=True)
class FileLayout:
    """What a source declares about its files beyond their encoding."""

    skip_leading_lines: int = 0
    skip_trailing_lines: int = 0
    formats: tuple[tuple[str, ColumnFormat], ...] = ()  # (column name, format)

    @property
    def plain(self) -> bool:
        """Are the file's bytes what the loader reads (no lines skipped, no formats)?"""
        return not (self.skip_leading_lines or self.skip_trailing_lines or self.formats)

    @property
    def sliced(self) -> bool:
        """Can SQL rewrite every declared format's values (each date's parts at fixed
        places: `DD/MM/YYYY` can, `D/M/YYYY` cannot)?"""
        return all(f.date is None or parse_date_format(f.date).fixed_width for _, f in self.formats)

    def by_position(self, header: Sequence[str]) -> tuple[ColumnFormat | None, ...]:
        """Each column's format, in the file's order (None: the clean form)."""
        formats = dict(self.formats)
        return tuple(formats.get(name) for name in header)

    def to_json(self) -> dict[str, Any] | None:
        if self.plain:
            return None
        return {
            "skip_leading_lines": self.skip_leading_lines,
            "skip_trailing_lines": self.skip_trailing_lines,
            "columns": {name: fmt.to_json() for name, fmt in self.formats},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> FileLayout:
        if not data:
            return cls()
        return cls(
            int(data.get("skip_leading_lines", 0)),
            int(data.get("skip_trailing_lines", 0)),
            tuple((name, ColumnFormat.from_json(f)) for name, f in data.get("columns", {}).items()),
        )


PLAIN_LAYOUT = FileLayout()  # no line skipped, no format declared


# --- converting a batch's values ----------------------------------------------------


_RE2_MEMORY = 64 << 20  # bytes for RE2's DFA cache, as inference gives its own
_NAMED_GROUP = re.compile(r"\(\?P<[a-zA-Z]+>")


class Converter:
    """Checks a column's values against its format and rewrites them canonically."""

    def __init__(
        self,
        one: str,
        rewrite: Callable[[str, list[str]], list[str]],
        description: str,
        *,
        dates: bool,
    ) -> None:
        one = _NAMED_GROUP.sub("(?:", one)  # a group's name may appear once a pattern
        self._one = re.compile(one)
        # a batch is checked at once on RE2 (a DFA: 0.015 s a million amounts, Python's
        # backtracking `re` 0.2 s), a value at a time only to find the one at fault
        options = re2.Options()
        options.max_mem = _RE2_MEMORY
        self._many = re2.compile(f"(?:{one})?(?:\n(?:{one})?)*", options)
        self._rewrite = rewrite
        self._description = description
        self._dates = dates

    def convert(self, values: Sequence[str]) -> list[str]:
        """The values in canonical text; FormatMisfitError at the first that does not fit."""
        blob = "\n".join(values)
        if (
            blob.count("\n") != len(values) - 1
            or self._many.fullmatch(blob.encode("utf-8", "surrogatepass")) is None
        ):
            raise self._misfit(values, self._first_misfit(values))
        converted = self._rewrite(blob, list(values))
        if self._dates:
            self._check_calendar(values, converted)
        return converted

    def fits(self, values: Sequence[str]) -> bool:
        try:
            self.convert(values)
        except FormatMisfitError:
            return False
        return True

    def _first_misfit(self, values: Sequence[str]) -> int:
        found = (i for i, v in enumerate(values) if v and self._one.fullmatch(v) is None)
        return next(found, 0)  # 0: only if RE2 and `re` ever disagree

    def _misfit(self, values: Sequence[str], index: int) -> FormatMisfitError:
        return FormatMisfitError(
            index,
            f"value {values[index]!r} does not fit the column's declared format "
            f"({self._description})",
        )

    def _check_calendar(self, values: Sequence[str], converted: Sequence[str]) -> None:
        """The patterns admit 31/02/2026; the calendar does not."""
        days = {v[:10] for v in converted if v}
        for day in days:
            try:
                dt.date.fromisoformat(day)
            except ValueError:
                index = next(i for i, v in enumerate(converted) if v[:10] == day)
                raise FormatMisfitError(
                    index,
                    f"value {values[index]!r} is not a date (declared format {self._description})",
                ) from None


def _date_converter(text: str) -> Converter:
    date = parse_date_format(text)
    if date.fixed_width:  # each part at a known place: slices, 3x faster than re.sub
        at = {group: (start, end) for group, start, end in date.slices}
        (ya, yb), (ma, mb), (da, db) = at["y"], at["m"], at["d"]
        if not date.has_time:

            def rewrite(blob: str, values: list[str]) -> list[str]:
                return [f"{v[ya:yb]}-{v[ma:mb]}-{v[da:db]}" if v else v for v in values]

        else:
            (ha, hb), (ia, ib) = at["H"], at["i"]
            sa, sb = at.get("s", (0, 0))
            seconds = "" if date.has_seconds else "00"

            def rewrite(blob: str, values: list[str]) -> list[str]:
                return [
                    f"{v[ya:yb]}-{v[ma:mb]}-{v[da:db]}T{v[ha:hb]}:{v[ia:ib]}:{v[sa:sb]}{seconds}"
                    if v
                    else v
                    for v in values
                ]

    else:
        one = re.compile(date.pattern)

        def padded(match: re.Match[str]) -> str:
            groups = match.groupdict()
            out = f"{groups['y']}-{int(groups['m']):02d}-{int(groups['d']):02d}"
            if date.has_time:
                out += f"T{int(groups['H']):02d}:{groups['i']}:{groups.get('s') or '00'}"
            return out

        def rewrite(blob: str, values: list[str]) -> list[str]:
            return one.sub(padded, blob).split("\n")

    return Converter(date.pattern, rewrite, text, dates=True)


# The last character of a value written in a negative form other than a leading minus.
_FORM_ENDS = {"trailing_minus": "-", "parentheses": ")", "dr_cr": "RrCc"}


def _signed(value: str) -> str:
    """A value in a negative (or credit) form, its separators already canonical, as a
    leading minus writes it: '(12.50)', '12.50-', '12.50 DR' -> '-12.50'; '12.50 CR'
    -> '12.50'."""
    if value.endswith(")"):
        return "-" + value[1:-1]
    if value.endswith("-"):
        return "-" + value[:-1]
    body = value[:-2].rstrip(" ")
    return "-" + body if value[-2:].upper() == "DR" else body


def _number_converter(number: NumberFormat) -> Converter:
    decimal = _LITERAL.get(number.decimal_separator, number.decimal_separator)
    thousands = number.thousands_separator
    group = (
        f"[{SPACES}]" if thousands and thousands in SPACES else _LITERAL.get(thousands, thousands)
    )
    whole = "0|[1-9][0-9]*"
    if thousands:
        whole = f"[1-9][0-9]{{0,2}}(?:{group}[0-9]{{3}})+|{whole}"
    n = f"(?:{whole})(?:{decimal}[0-9]+)?"
    forms = [f"\\+?{n}"]
    if "minus" in number.negative:
        forms.append(f"-{n}")
    if "trailing_minus" in number.negative:
        forms.append(f"{n}-")
    if "parentheses" in number.negative:
        forms.append(f"\\({n}\\)")
    if "dr_cr" in number.negative:
        forms.append(f"{n} ?(?i:DR|CR)")
    ends = frozenset("".join(_FORM_ENDS.get(form, "") for form in number.negative))
    removed = SPACES if thousands and thousands in SPACES else thousands
    separator = number.decimal_separator

    def rewrite(blob: str, values: list[str]) -> list[str]:
        # the values fit: separators are replaced in the whole batch at once (in C),
        # and only the few values with a mark at their end are rewritten one by one
        for char in removed:
            if char in blob:
                blob = blob.replace(char, "")
        if separator != ".":
            blob = blob.replace(separator, ".")
        out = blob.split("\n")
        if ends:
            for i in [i for i, v in enumerate(out) if v[-1:] in ends]:
                out[i] = _signed(out[i])
        return out

    description = ColumnFormat(number=number).describe()
    return Converter(f"(?:{'|'.join(forms)})", rewrite, description, dates=False)


@functools.cache
def converter_of(fmt: ColumnFormat) -> Converter:
    """The converter of a declared format (compiled once a process)."""
    if fmt.date is not None:
        return _date_converter(fmt.date)
    return _number_converter(fmt.number or NumberFormat())


# --- hints for columns inference kept as text -----------------------------------------

# Date formats a text column is tried against: where its values fit some, the file's
# status says which, and how to declare one.
HINT_DATE_FORMATS = (
    "DD/MM/YYYY",
    "MM/DD/YYYY",
    "DD.MM.YYYY",
    "DD-MM-YYYY",
    "MM-DD-YYYY",
    "D/M/YYYY",
    "M/D/YYYY",
    "D.M.YYYY",
    "DD/MM/YYYY HH:mm:ss",
    "MM/DD/YYYY HH:mm:ss",
    "DD/MM/YYYY HH:mm",
    "MM/DD/YYYY HH:mm",
    "DD.MM.YYYY HH:mm:ss",
    "DD.MM.YYYY HH:mm",
)
_PADDED_OF = {"D/M/YYYY": "DD/MM/YYYY", "M/D/YYYY": "MM/DD/YYYY", "D.M.YYYY": "DD.MM.YYYY"}


def fitting_date_formats(candidates: Sequence[str], values: Sequence[str]) -> list[str]:
    """The candidates every non-empty value fits (in the calendar too)."""
    return [c for c in candidates if converter_of(ColumnFormat(date=c)).fits(values)]


def shown_date_formats(fitting: Sequence[str]) -> list[str]:
    """The formats a hint names: a one-or-two-digit form only where its padded form
    does not fit too."""
    return [f for f in fitting if _PADDED_OF.get(f) not in fitting]
