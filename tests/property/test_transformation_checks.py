"""Any text, however broken, gets an answer from the checks: a checked query whose SQL
translates for both backends, or a rejection naming the problem; never a crash (which
the API would turn into a 500)."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from tally.core.columns import Column, ColumnType
from tally.core.errors import DefinitionRejectedError
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import check_sql
from tally.storage.sql_forms.postgresql import PostgresForms
from tally.storage.sql_forms.sqlite import SqliteForms

EXAMPLES = int(os.environ.get("TALLY_PROPERTY_EXAMPLES", "300"))
T = ColumnType
INPUTS = {
    "s": Input(
        4,
        (
            Column("payout_id", "c0", T.TEXT),
            Column("amount", "c1", T.DECIMAL, scale=2),
            Column("n", "c2", T.INTEGER),
            Column("day", "c3", T.DATE),
            Column("at", "c4", T.TIMESTAMP, timezone=True),
            Column("flag", "c5", T.BOOLEAN),
        ),
    ),
    "fx": Input(9, (Column("payout_id", "c0", T.TEXT), Column("rate", "c1", T.DECIMAL, scale=4))),
}
TOKENS = (
    "SELECT", "s.amount", "s.n", "s.payout_id", "fx.rate", "FROM", "s", "fx", "JOIN", "ON",
    "WHERE", "GROUP BY", "ORDER BY", "HAVING", "UNION ALL", "(", ")", ",", "+", "-", "*", "/",
    "=", "<", "AND", "OR", "NOT", "1", "2.50", "'x'", "NULL", "TRUE", "AS", "a", "b", "SUM(",
    "COUNT(*)", "ROUND(", "CAST(", "AS DECIMAL(18, 2)", "CASE WHEN", "THEN", "ELSE", "END",
    "IN", "BETWEEN", "LIKE", "'a%'", "lower(", "||", "OVER (", "PARTITION BY", "ROW_NUMBER()",
    "WITH t AS (", "t.", "EXISTS (", "DISTINCT", "LIMIT 3", "s.day", "s.at", "s.flag",
    "EXTRACT(YEAR FROM", "date_trunc('month',", "::text", "::date", "s.*", "IS NULL",
    "coalesce(", "nullif(", "AVG(", "LAG(", "substr(", "~", "regexp_replace(", "'[0-9]'", ";",
    "INTERVAL '1 day'", "INTERVAL '2 hours'", "s.at",
)  # fmt: skip
SEEDS = (
    "SELECT s.n FROM s",
    "SELECT s.payout_id, SUM(s.amount) AS t FROM s GROUP BY s.payout_id",
    "SELECT ROUND(s.amount / s.n, 2) AS r FROM s WHERE s.flag ORDER BY r",
    "SELECT s.payout_id FROM s UNION ALL SELECT fx.payout_id FROM fx",
)


@st.composite
def texts(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return " ".join(draw(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=25)))
    words = draw(st.sampled_from(SEEDS)).split()
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(words)))
        token = draw(st.sampled_from(TOKENS))
        if draw(st.booleans()) and at < len(words):
            words[at] = token
        else:
            words.insert(at, token)
    return " ".join(words)


@settings(max_examples=EXAMPLES, deadline=None)
@given(sql=st.one_of(texts(), st.text(max_size=80)))
def test_every_text_is_checked_or_rejected(sql: str) -> None:
    try:
        query = check_sql(sql, INPUTS)
    except DefinitionRejectedError as rejected:
        problems = rejected.problems
    else:
        problems = []
        assert query.statement(SqliteForms())
        assert query.statement(PostgresForms())
    assert all(p.field == "sql" and p.message for p in problems)
