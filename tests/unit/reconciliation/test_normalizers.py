"""Key normalisers: each one's exact effect, their order, and empty results."""

from __future__ import annotations

import pytest

from tally.core.reconciliation import Normalizer
from tally.services.reconciliation.normalizers import normalize, normalized_column

N = Normalizer


@pytest.mark.parametrize(
    ("steps", "value", "expected"),
    [
        ((N.TRIM,), " \t a  b \n", "a  b"),
        ((N.CASEFOLD,), "Straße REF", "strasse ref"),
        ((N.COLLAPSE_SPACES,), " a \t\n b  c ", " a b c "),
        ((N.STRIP_LEADING_ZEROS,), "007", "7"),
        ((N.STRIP_LEADING_ZEROS,), "000", "0"),
        ((N.STRIP_LEADING_ZEROS,), "0", "0"),
        ((N.STRIP_LEADING_ZEROS,), "A007", "A007"),
        ((N.ALNUM_ONLY,), "INV-00 9/é_x", "INV009éx"),
        ((N.DIGITS_ONLY,), "INV-00 9/x", "009"),
        ((N.DIGITS_ONLY, N.STRIP_LEADING_ZEROS), "INV-007", "7"),
        ((N.STRIP_LEADING_ZEROS, N.DIGITS_ONLY), "INV-007", "007"),  # in the order listed
        ((N.TRIM, N.CASEFOLD), "  Ref-7 ", "ref-7"),
        ((), " Ref ", " Ref "),
    ],
)
def test_each_normaliser(steps: tuple[N, ...], value: str, expected: str) -> None:
    assert normalize(value, steps) == expected
    assert normalized_column([value, value, None], steps) == [expected, expected, None]


@pytest.mark.parametrize(
    ("steps", "value"),
    [((N.DIGITS_ONLY,), "ABC"), ((N.ALNUM_ONLY,), "-/ "), ((N.TRIM,), "   "), ((), "")],
)
def test_a_key_normalised_to_nothing_is_empty(steps: tuple[N, ...], value: str) -> None:
    assert normalize(value, steps) is None
    assert normalize(None, steps) is None
    assert normalized_column([value], steps) == [None]
