"""A snapshot's page of row ids against a plain sort, on columns long enough that the
walk along an order takes several chunks, and with match counts on both sides of the
walk-or-sort choice (tests/property/test_query_semantics.py checks whole answers
against the reference model on small tables)."""

from __future__ import annotations

import numpy as np
import pytest

from tally.core.columns import Column, ColumnType
from tally.core.filters import Ordering
from tally.services.column_snapshots import WALK_CHUNK, ColumnSnapshot, _snapshot_column

ROWS = 2 * WALK_CHUNK + 1234


def snapshot(values: list[int | None]) -> tuple[ColumnSnapshot, Column]:
    column = Column("n", "c_n", ColumnType.INTEGER)
    row_ids = np.arange(10, 10 + 3 * len(values), 3, dtype=np.int64)  # ids are not positions
    return ColumnSnapshot(1, row_ids, {"c_n": _snapshot_column(column, values)}), column


def expected(
    values: list[int | None], row_ids: list[int], found: list[bool], descending: bool
) -> list[int]:
    """The database's order: missing first, then values, ties by row id; reversed."""
    rows = [(v is not None, v or 0, i) for v, i, f in zip(values, row_ids, found, strict=True) if f]
    rows.sort(reverse=descending)
    return [i for _, _, i in rows]


@pytest.mark.parametrize("matching", [0, 1, 7, 300, 5_000, ROWS // 2, ROWS])
@pytest.mark.parametrize("descending", [False, True])
def test_pages_follow_the_columns_order(matching: int, descending: bool) -> None:
    rng = np.random.default_rng(matching + descending)
    values: list[int | None] = [
        None if rng.random() < 0.05 else int(rng.integers(-50, 50)) for _ in range(ROWS)
    ]
    snap, column = snapshot(values)
    found = np.zeros(ROWS, dtype=np.bool_)
    found[rng.choice(ROWS, matching, replace=False)] = True
    whole = expected(values, snap.row_ids.tolist(), found.tolist(), descending)
    ordering = Ordering(column, descending)
    for offset, limit in [(0, 10), (0, 1000), (3, 100), (matching - 5, 10), (ROWS, 10)]:
        offset = max(offset, 0)
        page = snap.page_row_ids(found, matching, ordering, offset, limit)
        assert page == whole[offset : offset + limit]


def test_pages_in_row_order_either_way() -> None:
    snap, _ = snapshot(list(range(ROWS)))
    found = np.arange(ROWS) % 3 == 0
    ids = snap.row_ids[found].tolist()
    matching = len(ids)
    assert snap.page_row_ids(found, matching, Ordering(None), 5, 4) == ids[5:9]
    assert snap.page_row_ids(found, matching, Ordering(None, True), 0, 3) == ids[::-1][:3]
