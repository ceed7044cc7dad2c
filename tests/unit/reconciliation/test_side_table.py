"""SideTable: the engine's view of one side as columns (rows.py)."""

from __future__ import annotations

import pytest

from tally.services.reconciliation.matching import SideRow, SideTable


def test_rows_given_in_any_order_become_columns_in_position_order() -> None:
    table = SideTable.of([SideRow(3, ("C", "z"), 30, None), SideRow(1, ("A", None), None, 700_000)])
    assert table.positions == [1, 3]
    assert table.keys == (["A", "C"], [None, "z"])
    assert table.amounts == [None, 30]
    assert table.days == [700_000, None]
    assert len(table) == 2


def test_a_table_followed_by_later_rows_keeps_every_column_in_step() -> None:
    first = SideTable(range(1, 3), (["A", "B"],), [1, 2], [10, 20])
    later = SideTable(range(5, 6), (["E"],), [5], [50])
    joined = first + later
    assert (list(joined.positions), joined.keys, joined.amounts, joined.days) == (
        [1, 2, 5],
        (["A", "B", "E"],),
        [1, 2, 5],
        [10, 20, 50],
    )


def test_rows_added_must_come_after_and_have_the_same_key_columns() -> None:
    table = SideTable([1, 4], (["A", "B"],), [1, 2], [10, 20])
    with pytest.raises(ValueError, match="position 3 is not after"):
        _ = table + SideTable([3], (["C"],), [3], [30])
    with pytest.raises(ValueError, match=r"zip\(\) argument 2 is longer"):
        _ = table + SideTable([5], (["C"], ["c"]), [3], [30])
