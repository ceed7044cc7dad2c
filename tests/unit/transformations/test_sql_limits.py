"""The budget of a transformation's SQL (issue #30): each limit refuses the SQL past it,
naming its setting, before the step whose memory, time or recursion it bounds; the
check stops at its deadline; no RecursionError escapes."""

from __future__ import annotations

import time

import pytest

from tally.core.errors import DefinitionRejectedError
from tally.core.sql_limits import SqlLimits
from tally.services.transformations.query import check_sql
from tally.storage.sql_forms.postgresql import PostgresForms
from tally.storage.sql_forms.sqlite import SqliteForms
from unit.transformations.test_sql_check import INPUTS

LIMITS = SqlLimits(max_sql_bytes=200, max_nesting=3, max_depth=12, max_terms=60, max_ctes=2)
UNBOUNDED = SqlLimits(
    max_sql_bytes=10**7, max_nesting=10**5, max_depth=10**5, max_terms=10**7, max_ctes=10**5
)


def rejection(sql: str, limits: SqlLimits = LIMITS, deadline: float | None = None) -> str:
    with pytest.raises(DefinitionRejectedError) as caught:
        check_sql(sql, INPUTS, limits, deadline=deadline)
    [problem] = caught.value.problems
    assert problem.field == "sql"
    return problem.message


def chain(terms: int, operator: str = "+") -> str:
    return f" {operator} ".join(["s.n"] * terms)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            f"SELECT 'é{'x' * 185}' AS a",  # é is two bytes
            "the SQL is 201 bytes, more than TALLY_TRANSFORMATION_MAX_SQL_BYTES (200)",
        ),
        (
            "SELECT " + ", ".join(f"s.n AS a{i}" for i in range(12)) + " FROM s",
            "the SQL has 74 terms (names, values, operators), more than "
            "TALLY_TRANSFORMATION_MAX_TERMS (60)",
        ),
        (
            "SELECT s.n AS a FROM s WHERE\n  (((s.n IN (1))))",
            "the SQL nests parentheses, CASEs and prefix operators more than "
            "TALLY_TRANSFORMATION_MAX_NESTING (3) deep (line 2, column 13)",
        ),
        (
            "SELECT CASE WHEN CASE WHEN ((s.flag)) THEN TRUE END THEN 1 END AS a FROM s",
            "the SQL nests parentheses, CASEs and prefix operators more than "
            "TALLY_TRANSFORMATION_MAX_NESTING (3) deep (line 1, column 29)",
        ),
        (
            "SELECT s.n FROM s WHERE NOT NOT NOT NOT s.flag",
            "the SQL nests parentheses, CASEs and prefix operators more than "
            "TALLY_TRANSFORMATION_MAX_NESTING (3) deep (line 1, column 37)",
        ),
        (
            "SELECT - - - - s.n AS a FROM s",
            "the SQL nests parentheses, CASEs and prefix operators more than "
            "TALLY_TRANSFORMATION_MAX_NESTING (3) deep (line 1, column 14)",
        ),
        (
            "WITH a AS (SELECT 1 AS x), b AS (SELECT 2 AS x), c AS (SELECT 3 AS x) "
            "SELECT a.x FROM a",
            "the SQL has 3 CTEs, more than TALLY_TRANSFORMATION_MAX_CTES (2)",
        ),
        (
            "WITH a AS MATERIALIZED (SELECT 1 AS x), b AS NOT MATERIALIZED (SELECT 2 AS x), "
            "c AS MATERIALIZED (SELECT 3 AS x) SELECT a.x FROM a",
            "the SQL has 3 CTEs, more than TALLY_TRANSFORMATION_MAX_CTES (2)",
        ),
        (
            f"SELECT {chain(10)} AS a FROM s",
            "an expression nests more than TALLY_TRANSFORMATION_MAX_DEPTH (12) levels deep: "
            "each operator of a chain is a level (for many ORs of one column, write "
            "`x IN (...)`) (line 1, column 14)",
        ),
        (
            "WITH a AS (SELECT * FROM s), b AS (SELECT * FROM a) SELECT * FROM b",
            "the SQL has 157 terms (names, values, operators), more than "
            "TALLY_TRANSFORMATION_MAX_TERMS (60) once `*` is expanded and every column named",
        ),
    ],
)
def test_each_limit_refuses_the_sql_past_it_naming_its_setting(sql: str, message: str) -> None:
    assert rejection(sql) == message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT q.* FROM (SELECT * FROM s) AS q",  # a subquery's columns, `q.*`
        "SELECT * FROM (SELECT * FROM s UNION ALL SELECT * FROM s) AS q",  # a set operation
        "WITH a AS (WITH b AS (SELECT * FROM s) SELECT * FROM b) SELECT * FROM a",  # nested
    ],
)
def test_the_expansion_of_every_kind_of_star_is_bounded_before_it_is_made(sql: str) -> None:
    """Ten columns of `s` expanded twice or more: past 60 terms, refused before `qualify`."""
    assert rejection(sql).endswith(
        "TALLY_TRANSFORMATION_MAX_TERMS (60) once `*` is expanded and every column named"
    )
    assert check_sql(sql, INPUTS, UNBOUNDED).columns  # the estimate alone refused it


def test_the_qualified_tree_is_counted_again() -> None:
    """`qualify` names every column (`s.n AS n`): 34 tokens, 28 nodes, 41 and more once
    qualified."""
    sql = "SELECT s.payout_id, s.amount, s.status, s.txn_date, s.n, s.flag, s.at, s.local FROM s"
    assert rejection(sql, SqlLimits(max_terms=40)) == (
        "the SQL has 41 terms (names, values, operators), more than "
        "TALLY_TRANSFORMATION_MAX_TERMS (40) once `*` is expanded and every column named"
    )


def test_within_the_limits_the_sql_is_checked_as_ever() -> None:
    """Binary and negative numbers are no prefix runs; an operator chain within the depth."""
    query = check_sql(f"SELECT {chain(4, '-')} - -1 AS a FROM s WHERE (s.n > 1)", INPUTS, LIMITS)
    assert [c.name for c in query.columns] == ["a"]


def test_a_check_past_its_deadline_is_refused() -> None:
    assert rejection("SELECT s.n FROM s", SqlLimits(), deadline=time.monotonic() - 1) == (
        "checking the SQL took longer than TALLY_TRANSFORMATION_TIMEOUT_SECONDS: make it smaller"
    )


TOO_DEEP = (
    "the SQL nests too deeply to be read: nest fewer parentheses, CASEs and subqueries "
    "(TALLY_TRANSFORMATION_MAX_NESTING, TALLY_TRANSFORMATION_MAX_DEPTH)"
)


def test_limits_set_past_pythons_recursion_give_a_rejection_not_a_crash() -> None:
    assert rejection(f"SELECT {'(' * 300}1{')' * 300} AS a", UNBOUNDED) == TOO_DEEP
    query = check_sql(f"SELECT {chain(500, '||')} AS a FROM s", INPUTS, UNBOUNDED)
    for forms in (SqliteForms(), PostgresForms()):  # the SQL writer recurses a parenthesis per `||`
        with pytest.raises(DefinitionRejectedError) as caught:
            query.statement(forms)
        assert caught.value.problems[0].message == TOO_DEEP


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT " + "(" * 24 + "s.n" + ")" * 24 + " AS a FROM s",
        "SELECT " + "lower(" * 23 + "s.payout_id" + ")" * 23 + " AS a FROM s",
        f"SELECT {chain(90, '||')} AS a FROM s",
        f"SELECT s.n FROM s WHERE {chain(90, 'OR').replace('s.n', 's.flag')}",
    ],
)
def test_the_default_limits_leave_sqlglot_room(sql: str) -> None:
    """What the defaults accept, sqlglot checks and writes for both backends."""
    query = check_sql(sql, INPUTS)
    for forms in (SqliteForms(), PostgresForms()):
        assert query.statement(forms).startswith("SELECT")
