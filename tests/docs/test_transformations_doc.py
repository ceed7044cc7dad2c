"""docs/transformations.md stays true: every SQL example passes the checks, and every
rejection in its table gets exactly the message written there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tally.core.columns import Column, ColumnType
from tally.core.errors import DefinitionRejectedError
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import check_sql

DOC = (Path(__file__).resolve().parents[2] / "docs" / "transformations.md").read_text()
T = ColumnType
INPUTS = {
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
EXAMPLES = re.findall(r"```sql\n(.*?)```", DOC, re.S)
TABLE = DOC.split("<!-- rejections -->", 1)[1].split("<!-- /rejections -->", 1)[0]
REJECTIONS = [
    (sql, message.replace("``", "`"))
    for sql, message in re.findall(r"^\| `(.+?)` \| `(.+)` \|$", TABLE, re.M)
]


def test_the_page_has_examples_and_rejections() -> None:
    assert len(EXAMPLES) >= 10
    assert len(REJECTIONS) >= 15


@pytest.mark.parametrize("sql", EXAMPLES)
def test_every_example_passes_the_checks(sql: str) -> None:
    query = check_sql(sql, INPUTS)
    assert query.backend_sql(postgresql=False)
    assert query.backend_sql(postgresql=True)


@pytest.mark.parametrize(("sql", "message"), REJECTIONS)
def test_every_rejection_reads_as_documented(sql: str, message: str) -> None:
    with pytest.raises(DefinitionRejectedError) as caught:
        check_sql(sql, INPUTS)
    assert [p.message for p in caught.value.problems] == [message]
