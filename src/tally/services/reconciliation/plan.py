"""The plan rows of an engine's outcome: what storage/derived_outputs.py turns into the
output, one per output row, in output order (matching.output_rows: no `Match` built),
each with the row ids of its left and right rows. A full run and an incremental run
write the same rows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tally.core.reconciliation import MatchStatus
from tally.services.reconciliation.matching import Outcome, output_rows

RowIds = Sequence[int] | Mapping[int, int]  # a side's row id by position
# Plain str: the drivers write a str subclass by its own rules (psycopg: an Enum's name).
_STATUS_TEXT = {status: str(status) for status in MatchStatus}


def plan_rows(
    outcome: Outcome, left_ids: RowIds, right_ids: RowIds, first: int = 1
) -> Iterator[tuple[Any, ...]]:
    """(row id from `first`, match id, status, pass, difference, reason, left position,
    right position, left row id, right row id) of each output row, in output order."""
    status_text = _STATUS_TEXT
    for seq, (match_id, status, name, difference, reason, lp, rp) in enumerate(
        output_rows(outcome), first
    ):
        yield (
            seq,
            match_id,
            status_text[status],
            name,
            difference,
            reason,
            lp,
            rp,
            None if lp is None else left_ids[lp],
            None if rp is None else right_ids[rp],
        )
