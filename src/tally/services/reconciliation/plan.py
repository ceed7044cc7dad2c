"""The plan rows of an engine's outcome: what storage/derived/outputs.py turns into the
output, one per output row, in output order (matching.output_columns: no `Match` built),
each with the row ids of its left and right rows. A full run and an incremental run
write the same rows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tally.core.reconciliation import MatchStatus
from tally.services.reconciliation.matching import Outcome, or_none, output_columns

RowIds = Sequence[int] | Mapping[int, int]  # a side's row id by position
# Plain str: the drivers write a str subclass by its own rules (psycopg: an Enum's name).
_STATUS_TEXT = {status: str(status) for status in MatchStatus}


def plan_rows(
    outcome: Outcome, left_ids: RowIds, right_ids: RowIds, first: int = 1
) -> Iterator[tuple[Any, ...]]:
    """(row id from `first`, match id, status, pass, difference, reason, left position,
    right position, left row id, right row id) of each output row, in output order."""
    columns = output_columns(outcome)
    left_refs = _row_ids(left_ids, columns.left)
    right_refs = _row_ids(right_ids, columns.right)
    status_text = _STATUS_TEXT.__getitem__
    for part, values in columns.batches():
        values[1] = list(map(status_text, values[1]))
        yield from zip(
            range(first + part.start, first + part.stop),
            *values,
            or_none(left_refs[part]),
            or_none(right_refs[part]),
            strict=True,
        )


def _row_ids(ids: RowIds, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The row id at each position (position 0, none: 0)."""
    if isinstance(ids, Mapping):
        found = (ids[p] if p else 0 for p in positions.tolist())
        return np.fromiter(found, dtype=np.int64, count=len(positions))
    return np.asarray(ids, dtype=np.int64)[positions]  # (ids[0] is 0: see runs._by_position)
