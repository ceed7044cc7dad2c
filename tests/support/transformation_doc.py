"""docs/transformations.md's example inputs and SQL examples, for the tests that check
the page (tests/docs) and run its examples on both backends (tests/integration)."""

from __future__ import annotations

import re
from pathlib import Path

from tally.core.columns import Column, ColumnType
from tally.services.transformations.dialect import Input

DOC = (Path(__file__).resolve().parents[2] / "docs" / "transformations.md").read_text()
T = ColumnType
DOC_INPUTS = {
    "s": Input(
        4,
        (
            Column("payout_id", "c0", T.TEXT),
            Column("currency", "c1", T.TEXT),
            Column("amount", "c2", T.DECIMAL, scale=2),
            Column("fee", "c3", T.DECIMAL, scale=3),
            Column("status", "c4", T.TEXT),
            Column("txn_date", "c5", T.DATE),
            Column("settled_at", "c6", T.TIMESTAMP, timezone=True),
            Column("items", "c7", T.INTEGER),
            Column("captured", "c8", T.BOOLEAN),
        ),
    ),
    "b": Input(
        9,
        (
            Column("reference", "c0", T.TEXT),
            Column("bank.amount", "c1", T.DECIMAL, scale=2),
            Column("booked", "c2", T.DATE),
            Column("memo", "c3", T.TEXT),
        ),
    ),
}
DOC_EXAMPLES = re.findall(r"```sql\n(.*?)```", DOC, re.S)
