"""Key normalisers: the text a key column is compared by, after a pass's `normalize` list.

The normalisers run in the order the pass lists them. Each is a plain text function:

- `trim`: removes whitespace (`str.strip`: any Unicode whitespace) from both ends.
- `casefold`: `str.casefold` (a caseless form: "Straße" and "STRASSE" compare equal).
- `collapse_spaces`: every run of whitespace becomes one space (ends are not trimmed).
- `strip_leading_zeros`: removes leading "0" characters; an all-zero value keeps one "0"
  ("007" -> "7", "000" -> "0", "A007" unchanged).
- `alnum_only`: keeps only letters and digits (`str.isalnum`, Unicode).
- `digits_only`: keeps only the ASCII digits 0-9.

A key that is empty (None), or that a normaliser turns into "", equals nothing: two rows
whose references both lose every character to `digits_only` are not a match.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tally.core.reconciliation import Normalizer

_WHITESPACE_RUN = re.compile(r"\s+")
_NOT_ALNUM = re.compile(r"[\W_]+")  # \w is isalnum() plus "_"
_NOT_DIGIT = re.compile(r"[^0-9]+")


def _strip_leading_zeros(text: str) -> str:
    stripped = text.lstrip("0")
    return stripped if stripped or not text else "0"


NORMALIZERS: dict[Normalizer, Callable[[str], str]] = {
    Normalizer.TRIM: str.strip,
    Normalizer.CASEFOLD: str.casefold,
    Normalizer.COLLAPSE_SPACES: lambda text: _WHITESPACE_RUN.sub(" ", text),
    Normalizer.STRIP_LEADING_ZEROS: _strip_leading_zeros,
    Normalizer.ALNUM_ONLY: lambda text: _NOT_ALNUM.sub("", text),
    Normalizer.DIGITS_ONLY: lambda text: _NOT_DIGIT.sub("", text),
}


def normalize(value: str | None, normalizers: tuple[Normalizer, ...]) -> str | None:
    """The value a key compares by: None for an empty key, or one that normalises to ""."""
    if value is None:
        return None
    for name in normalizers:
        value = NORMALIZERS[name](value)
    return value or None


def normalized_column(
    values: list[str | None], normalizers: tuple[Normalizer, ...]
) -> list[str | None]:
    """`normalize` applied to a whole column, each distinct value computed once."""
    if not normalizers:
        return [value or None for value in values]
    cache: dict[str | None, str | None] = {None: None}
    out: list[str | None] = []
    append = out.append
    for value in values:
        try:
            append(cache[value])
        except KeyError:
            result = cache[value] = normalize(value, normalizers)
            append(result)
    return out
