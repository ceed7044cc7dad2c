"""The key table's keys (services/reconciliation/keys.py): signatures whose normalisers
extend one another share one key column, and rows equal under any of them are equal
under it, whichever side they are on."""

from __future__ import annotations

from support.reconciliation_cases import definition
from tally.core.reconciliation import SideName
from tally.services.reconciliation.keys import chains, side_keys
from tally.services.reconciliation.matching import SideRow, SideTable

EXACT = {"name": "exact", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]}
TRIMMED = {
    "name": "trimmed",
    "type": "one_to_one",
    "keys": [{"left": "ref", "right": "ref", "normalize": ["trim", "casefold"]}],
}
DIGITS = {
    "name": "digits",
    "type": "one_to_many",
    "keys": [{"left": "ref", "right": "ref", "normalize": ["digits_only"]}],
}


def rows(*refs: str | None) -> SideTable:
    return SideTable.of(SideRow(n, (ref,), 0, 0) for n, ref in enumerate(refs, 1))


def test_extending_normalisers_share_a_column_and_others_do_not() -> None:
    found = chains(definition([EXACT, TRIMMED, DIGITS]))
    assert [[p[0][2] for p in chain] for chain in found] == [
        [("trim", "casefold"), ()],
        [("digits_only",)],
    ]


def test_rows_equal_under_any_signature_of_a_chain_share_its_key() -> None:
    chosen = definition([EXACT, TRIMMED])
    left = side_keys(chosen, SideName.LEFT, rows(" A", "  ", None, "b"))[0]
    right = side_keys(chosen, SideName.RIGHT, rows("a", "  ", "", "B "))[0]
    assert left[0] == right[0] == "a"  # equal once trimmed and casefolded
    assert left[1] == right[1] is not None  # equal raw, empty once trimmed: still one group
    assert left[2] is None  # empty: in no group
    assert left[3] == right[3] == "b"
