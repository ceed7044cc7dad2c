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
from collections.abc import Callable, Iterable
from functools import partial

from tally.core.reconciliation import Normalizer

_WHITESPACE_RUN = re.compile(r"\s+")
_NOT_ALNUM = re.compile(r"[\W_]+")  # \w is isalnum() plus "_"
_NOT_DIGIT = re.compile(r"[^0-9]+")
_LEADING_ZEROS = re.compile(r"\A0+(?=.)", re.DOTALL)  # keeps the last character: "000" -> "0"

# Each a C-level callable, so a column of a million keys is normalised by `map`.
NORMALIZERS: dict[Normalizer, Callable[[str], str]] = {
    Normalizer.TRIM: str.strip,
    Normalizer.CASEFOLD: str.casefold,
    Normalizer.COLLAPSE_SPACES: partial(_WHITESPACE_RUN.sub, " "),
    Normalizer.STRIP_LEADING_ZEROS: partial(_LEADING_ZEROS.sub, ""),
    Normalizer.ALNUM_ONLY: partial(_NOT_ALNUM.sub, ""),
    Normalizer.DIGITS_ONLY: partial(_NOT_DIGIT.sub, ""),
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
    """`normalize` applied to a whole column, at C speed: "" stands for an empty key
    while the normalisers run (each keeps "" as it is), and becomes None at the end."""
    texts: Iterable[str] = values if None not in values else [v or "" for v in values]  # type: ignore[assignment]
    for name in normalizers:
        texts = map(NORMALIZERS[name], texts)
    out: list[str | None] = list(texts)
    return out if "" not in out else [value or None for value in out]
