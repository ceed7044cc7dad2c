"""docs/transformations.md stays true: every SQL example passes the checks, and every
rejection in its table gets exactly the message written there."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from support.transformation_doc import DOC, DOC_EXAMPLES, DOC_INPUTS
from tally.core.errors import DefinitionRejectedError
from tally.services.transformations.query import check_sql
from tally.storage.sql_forms.postgresql import PostgresForms
from tally.storage.sql_forms.sqlite import SqliteForms

TABLE = DOC.split("<!-- rejections -->", 1)[1].split("<!-- /rejections -->", 1)[0]
REJECTIONS = [
    (sql, message.replace("``", "`"))
    for sql, message in re.findall(r"^\| `(.+?)` \| `(.+)` \|$", TABLE, re.M)
]


def test_the_page_has_examples_and_rejections() -> None:
    assert len(DOC_EXAMPLES) >= 10
    assert len(REJECTIONS) >= 15


@pytest.mark.parametrize("sql", DOC_EXAMPLES)
def test_every_example_passes_the_checks(sql: str) -> None:
    query = check_sql(sql, DOC_INPUTS)
    today = dt.date(2026, 11, 29)  # CURRENT_DATE
    assert query.statement(SqliteForms(), today=today)
    assert query.statement(PostgresForms(), today=today)


@pytest.mark.parametrize(("sql", "message"), REJECTIONS)
def test_every_rejection_reads_as_documented(sql: str, message: str) -> None:
    with pytest.raises(DefinitionRejectedError) as caught:
        check_sql(sql, DOC_INPUTS)
    assert [p.message for p in caught.value.problems] == [message]
