"""A snapshot's text columns, whose distinct values are kept packed as UTF-8 bytes
(`SortedTexts`): every comparison answers as Python's own comparison of the strings
(code point order, the order both backends compare text in), beyond ASCII too, and the
packed values cost their bytes, not a Python string each."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from tally.core.columns import Column, ColumnType
from tally.core.filters import Condition, Operator
from tally.processes.allocator import return_freed_memory
from tally.services.column_snapshots import SortedTexts, _snapshot_column

COLUMN = Column("name", "c_name", ColumnType.TEXT)
VALUES: list[str | None] = [
    "zebra",
    "Émile",
    "émile",
    "apple",
    None,
    "日本",
    "𝄞 clef",  # beyond the BMP: four bytes in UTF-8
    "\uffff",
    "apple",
    "",
    "ab",
    "a",
    None,
    "émile",
]
PROBES = [
    "",
    "a",
    "ab",
    "abc",
    "apple",
    "Émile",
    "émile",
    "émilf",
    "日",
    "日本",
    "𝄞",
    "\ud800",
    "~",
]


def expected(op: Operator, probe: str) -> list[bool]:
    compare = {
        Operator.EQ: lambda v: v == probe,
        Operator.GT: lambda v: v > probe,
        Operator.GTE: lambda v: v >= probe,
        Operator.LT: lambda v: v < probe,
        Operator.LTE: lambda v: v <= probe,
    }[op]
    return [v is not None and compare(v) for v in VALUES]


@pytest.mark.parametrize("op", [Operator.EQ, Operator.GT, Operator.GTE, Operator.LT, Operator.LTE])
def test_comparisons_answer_as_pythons_own(op: Operator) -> None:
    column = _snapshot_column(COLUMN, VALUES)
    for probe in PROBES:
        mask = column.matches(Condition(COLUMN, op, (probe,)))
        assert mask is not None
        assert mask.tolist() == expected(op, probe), (op, probe)


def test_in_lists_and_the_order_follow_code_points() -> None:
    column = _snapshot_column(COLUMN, VALUES)
    mask = column.matches(Condition(COLUMN, Operator.IN, ("émile", "日本", "absent")))
    assert mask is not None
    assert mask.tolist() == [v in ("émile", "日本") for v in VALUES]
    present = [i for i, v in enumerate(VALUES) if v is not None]
    by_value = sorted(present, key=lambda i: (VALUES[i], i))
    missing = [i for i, v in enumerate(VALUES) if v is None]
    assert column.order.tolist() == missing + by_value


def test_packed_texts_cost_their_bytes() -> None:
    texts = sorted({f"invoice-{i:08d}-é" for i in range(10_000)})
    packed = SortedTexts.of(texts)
    assert len(packed) == len(texts)
    assert [packed[i].decode() for i in (0, 1, 9_999)] == [texts[0], texts[1], texts[9_999]]
    utf8 = sum(len(t.encode()) for t in texts)
    assert packed.nbytes == utf8 + 4 * len(texts)  # the bytes and an int32 offset each
    assert packed.ends.dtype == np.int32


def test_freed_memory_is_returned_where_the_c_library_can() -> None:
    assert return_freed_memory() is (platform.libc_ver()[0] == "glibc")
