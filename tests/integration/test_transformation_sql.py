"""The translated SQL run on real tables made by the loader, on SQLite and PostgreSQL:
every allowed construct gives the same rows and types on both (each compared with the
same expected values), decimals stay exact through SUM, products and stated divisions."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from support.factories import Tenant, make_source, write_file
from support.transformation_doc import DOC_EXAMPLES, DOC_INPUTS
from tally.core.columns import ColumnType, canonical_timestamp
from tally.runtime import Runtime
from tally.services.loader.load import load_into
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import CheckedQuery, check_sql
from tally.storage.engine import write_connection
from tally.storage.resources import Resource
from tally.storage.sql_forms import forms_of
from tally.storage.sql_forms.postgresql import PostgresForms
from tally.storage.sql_forms.sqlite import SqliteForms
from tally.storage.transformation_sql import fetch_query_rows

PAYMENTS = (
    "id,amount,fee,day,at,flag,memo,bank.amount\n"
    "1,10.00,0.125,2024-01-05,2024-01-05T10:00:00Z,true,Alpha-1,1\n"
    "2,10.01,0.100,2024-01-06,2024-01-06T11:30:00Z,false,beta-22,2\n"
    "3,-5.50,0.333,,2024-01-07T09:00:00Z,true,,3\n"
    "4,10.00,1.000,2024-02-01,,,gamma,4\n"
    "5,,0.005,2024-02-15,2024-02-15T23:59:59Z,false,Delta é,5\n"
    "6,20.25,-0.005,2024-03-01,2024-03-01T00:00:00Z,true,alpha,6\n"
)
RATES = "memo,rate\nAlpha-1,1.5000\nbeta-22,0.9999\nalpha,2.0001\nzeta,3.0000\n"


@pytest.fixture
def inputs(runtime: Runtime, tenant: Tenant) -> dict[str, Input]:
    payments = make_source(runtime.engine, tenant, PAYMENTS)
    rates = make_source(runtime.engine, tenant, RATES)
    return {"p": as_input(payments), "fx": as_input(rates)}


def as_input(resource: Resource) -> Input:
    return Input(resource.id, resource.columns)


def test_storage_picks_the_forms_of_the_connections_backend(runtime: Runtime) -> None:
    """Services name no backend: storage writes a query in its connection's forms."""
    expected = PostgresForms if runtime.engine.dialect.name == "postgresql" else SqliteForms
    with runtime.engine.connect() as conn:
        assert type(forms_of(conn)) is expected


TODAY = dt.date(2026, 11, 29)  # CURRENT_DATE


def run(engine: Engine, query: CheckedQuery) -> list[tuple[Any, ...]]:
    """The rows as Python values, whatever the backend's stored forms."""
    postgresql = engine.dialect.name == "postgresql"
    with engine.connect() as conn:
        rows = fetch_query_rows(conn, query.statement(forms_of(conn), today=TODAY))
    return [
        tuple(value_of(c, v, postgresql) for c, v in zip(query.columns, r, strict=True))
        for r in rows
    ]


def value_of(column: Any, value: Any, postgresql: bool) -> Any:
    if value is None:
        return None
    if column.type is ColumnType.DECIMAL:
        if postgresql:
            assert value.as_tuple().exponent == -column.scale  # stored with its scale
            return value
        assert isinstance(value, int)  # never a float
        return Decimal(value).scaleb(-column.scale)
    if column.type is ColumnType.INTEGER:
        assert isinstance(value, int)
        return value
    if column.type is ColumnType.BOOLEAN:
        return bool(value)
    if column.type is ColumnType.TIMESTAMP and isinstance(value, dt.datetime):
        naive = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        return canonical_timestamp(naive.isoformat())[0]
    return value


D = Decimal
CASES: list[tuple[str, list[tuple[Any, ...]]]] = [
    (  # the example shape: filter, group, SUM, COUNT, MIN
        "SELECT p.flag, SUM(p.amount) AS amount, COUNT(*) AS n, MIN(p.day) AS first "
        "FROM p WHERE p.id < 6 GROUP BY p.flag ORDER BY p.flag NULLS FIRST",
        [
            (None, D("10.00"), 1, "2024-02-01"),
            (False, D("10.01"), 2, "2024-01-06"),
            (True, D("4.50"), 2, "2024-01-05"),
        ],
    ),
    (  # exact products and sums: scale 2 x 3 = 5
        "SELECT SUM(p.amount * p.fee) AS t, SUM(p.amount + p.fee) AS u FROM p",
        [(D("10.31825"), D("46.313"))],
    ),
    (  # stated divisions round half away from zero, negatives too, on both
        "SELECT p.id, ROUND(p.amount / 3, 2) AS a, CAST(p.amount / p.fee AS DECIMAL(18, 1)) AS b, "
        "ROUND(p.fee / 2, 3) AS c, ROUND(p.amount / 0, 2) AS z FROM p ORDER BY p.id",
        [
            (1, D("3.33"), D("80.0"), D("0.063"), None),
            (2, D("3.34"), D("100.1"), D("0.050"), None),
            (3, D("-1.83"), D("-16.5"), D("0.167"), None),
            (4, D("3.33"), D("10.0"), D("0.500"), None),
            (5, None, None, D("0.003"), None),
            (6, D("6.75"), D("-4050.0"), D("-0.003"), None),
        ],
    ),
    (  # ROUND and AVG with a stated scale
        "SELECT ROUND(AVG(p.amount), 3) AS mean, ROUND(p2.x, 1) AS r FROM p, (SELECT -0.25 "
        "AS x) p2 GROUP BY p2.x",
        [(D("8.952"), D("-0.3"))],
    ),
    (  # CTE, join, decimal of different scales compared
        "WITH r AS (SELECT fx.memo, fx.rate FROM fx WHERE fx.rate > 1) "
        "SELECT p.id, p.amount * r.rate AS converted FROM p JOIN r ON r.memo = p.memo "
        "WHERE p.amount >= 10.000 ORDER BY p.id",
        [(1, D("15.000000")), (6, D("40.502025"))],
    ),
    (  # outer joins
        "SELECT p.id, fx.rate FROM p LEFT JOIN fx ON fx.memo = p.memo WHERE p.id <= 3 ORDER "
        "BY p.id",
        [(1, D("1.5000")), (2, D("0.9999")), (3, None)],
    ),
    (
        "SELECT fx.memo, p.id FROM p RIGHT JOIN fx ON fx.memo = p.memo ORDER BY fx.memo",
        [("Alpha-1", 1), ("alpha", 6), ("beta-22", 2), ("zeta", None)],
    ),
    (
        "SELECT COUNT(*) AS n FROM p FULL JOIN fx ON fx.memo = p.memo",
        [(7,)],
    ),
    (
        "SELECT COUNT(*) AS n FROM p CROSS JOIN fx",
        [(24,)],
    ),
    (  # UNION ALL meets at the larger scale; DISTINCT; LIMIT/OFFSET
        "SELECT u.v FROM (SELECT p.amount AS v FROM p WHERE p.id = 1 UNION ALL "
        "SELECT fx.rate FROM fx WHERE fx.memo = 'zeta') u ORDER BY u.v",
        [(D("3.0000"),), (D("10.0000"),)],
    ),
    (
        "SELECT DISTINCT p.amount FROM p WHERE p.amount IS NOT NULL ORDER BY p.amount DESC "
        "LIMIT 2 OFFSET 1",
        [(D("10.01"),), (D("10.00"),)],
    ),
    (  # HAVING, IN list and subquery, EXISTS, scalar subquery, BETWEEN
        "SELECT p.memo, COUNT(*) AS n FROM p WHERE p.id IN (1, 2, 6) GROUP BY p.memo HAVING "
        "COUNT(*) >= 1 ORDER BY p.memo",
        [("Alpha-1", 1), ("alpha", 1), ("beta-22", 1)],
    ),
    (
        "SELECT p.id FROM p WHERE p.amount IN (SELECT fx.rate * 10 FROM fx) OR "
        "EXISTS (SELECT 1 FROM fx WHERE fx.memo = p.memo AND fx.rate < 1) ORDER BY p.id",
        [(2,)],
    ),
    (
        "SELECT p.id, (SELECT MAX(fx.rate) FROM fx WHERE fx.memo = p.memo) AS r FROM p "
        "WHERE p.amount BETWEEN 10 AND 10.01 ORDER BY p.id",
        [(1, D("1.5000")), (2, D("0.9999")), (4, None)],
    ),
    (  # CASE, COALESCE, NULLIF, ABS
        "SELECT p.id, CASE WHEN p.amount < 0 THEN 'refund' WHEN p.amount > 15 THEN 'large' "
        "ELSE 'normal' END AS k, "
        "COALESCE(p.amount, p.fee) AS a, NULLIF(p.memo, 'gamma') AS m, ABS(p.amount) AS b "
        "FROM p ORDER BY p.id",
        [
            (1, "normal", D("10.000"), "Alpha-1", D("10.00")),
            (2, "normal", D("10.010"), "beta-22", D("10.01")),
            (3, "refund", D("-5.500"), None, D("5.50")),
            (4, "normal", D("10.000"), None, D("10.00")),
            (5, "normal", D("0.005"), "Delta é", None),
            (6, "large", D("20.250"), "alpha", D("20.25")),
        ],
    ),
    (  # text functions: ASCII case folding on both, PostgreSQL's substring positions
        "SELECT p.id, lower(p.memo) AS l, upper(p.memo) AS u, length(p.memo) AS n, "
        "substr(p.memo, 0, 3) AS s, "
        "substring(p.memo, 2) AS t, replace(p.memo, 'a', '4') AS r, trim(' ' || p.memo || ' "
        "') AS w "
        "FROM p WHERE p.id IN (1, 5) ORDER BY p.id",
        [
            (1, "alpha-1", "ALPHA-1", 7, "Al", "lpha-1", "Alph4-1", "Alpha-1"),
            (5, "delta é", "DELTA é", 7, "De", "elta é", "Delt4 é", "Delta é"),
        ],
    ),
    (  # concatenation: || propagates NULL, CONCAT skips it; numbers as their exact text
        "SELECT p.id, p.memo || '/' || p.amount AS a, CONCAT(p.memo, '/', p.amount, '/', "
        "p.flag) AS b, "
        "CAST(p.fee AS TEXT) AS c, CAST(p.at AS TEXT) AS d FROM p WHERE p.id IN (3, 4) ORDER "
        "BY p.id",
        [
            (3, None, "/-5.50/true", "0.333", "2024-01-07T09:00:00Z"),
            (4, "gamma/10.00", "gamma/10.00/", "1.000", None),
        ],
    ),
    (  # regular expressions: match, extraction, first-match replacement; LIKE is case-sensitive
        "SELECT p.id, p.memo ~ '^[a-z]+-[0-9]+$' AS m, regexp_substr(p.memo, '[0-9]+') AS d, "
        "regexp_replace(p.memo, '[aeiou]', '_') AS r, p.memo LIKE 'a%' AS k FROM p WHERE "
        "p.id IN (1, 2, 6) ORDER BY p.id",
        [
            (1, False, "1", "Alph_-1", False),
            (2, True, "22", "b_ta-22", False),
            (6, False, None, "_lpha", True),
        ],
    ),
    (  # dates: parts, truncation, arithmetic in days; timestamps: parts, truncation, comparison
        "SELECT p.id, EXTRACT(YEAR FROM p.day) AS y, EXTRACT(MONTH FROM p.day) AS m, "
        "EXTRACT(DOW FROM p.day) AS w, "
        "EXTRACT(QUARTER FROM p.day) AS q, date_trunc('month', p.day) AS f, p.day + 30 AS later, "
        "p.day - 1 AS before, p.day - CAST('2024-01-01' AS DATE) AS since, EXTRACT(HOUR FROM "
        "p.at) AS h, "
        "date_trunc('day', p.at) AS dd, p.at >= '2024-01-06T11:30:00Z' AS late, CAST(p.at AS "
        "DATE) AS on_day "
        "FROM p WHERE p.id IN (2, 6) ORDER BY p.id",
        [
            (
                2,
                2024,
                1,
                6,
                1,
                "2024-01-01",
                "2024-02-05",
                "2024-01-05",
                5,
                11,
                "2024-01-06T00:00:00",
                True,
                "2024-01-06",
            ),
            (
                6,
                2024,
                3,
                5,
                1,
                "2024-03-01",
                "2024-03-31",
                "2024-02-29",
                60,
                0,
                "2024-03-01T00:00:00",
                True,
                "2024-03-01",
            ),
        ],
    ),
    (  # window functions
        "SELECT p.id, ROW_NUMBER() OVER (ORDER BY p.amount DESC, p.id) AS rn, RANK() OVER "
        "(ORDER BY p.amount) AS rk, "
        "DENSE_RANK() OVER (ORDER BY p.amount) AS dr, LAG(p.amount, 1, 0) OVER (ORDER BY "
        "p.id) AS prev, "
        "LEAD(p.id) OVER (ORDER BY p.id) AS nxt, SUM(p.amount) OVER (ORDER BY p.id) AS running, "
        "FIRST_VALUE(p.memo) OVER (PARTITION BY p.flag ORDER BY p.id) AS fv, NTILE(2) OVER "
        "(ORDER BY p.id) AS half, "
        "ROUND(AVG(p.fee) OVER (PARTITION BY p.flag), 4) AS mean FROM p ORDER BY p.id",
        [
            (1, 4, 2, 2, D("0.00"), 2, D("10.00"), "Alpha-1", 1, D("0.1510")),
            (2, 3, 4, 3, D("10.00"), 3, D("20.01"), "beta-22", 1, D("0.0525")),
            (3, 6, 1, 1, D("10.01"), 4, D("14.51"), "Alpha-1", 1, D("0.1510")),
            (4, 5, 2, 2, D("-5.50"), 5, D("24.51"), "gamma", 2, D("1.0000")),
            (5, 1, 6, 5, D("10.00"), 6, D("24.51"), "beta-22", 2, D("0.0525")),
            (6, 2, 5, 4, None, None, D("44.76"), "Alpha-1", 2, D("0.1510")),
        ],
    ),
    (  # untyped NULLs are text; literals of each type
        "SELECT NULL AS n, 'x' AS t, 1.50 AS d, 7 AS i, TRUE AS b, CAST(NULL AS DECIMAL(18, "
        "2)) AS z "
        "FROM p WHERE p.id = 1 ORDER BY n, t",
        [(None, "x", D("1.50"), 7, True, None)],
    ),
    (  # casts between the types; booleans; quoted names with a dot
        "SELECT p.id, CAST(p.flag AS INTEGER) AS f, CAST(p.id AS BOOLEAN) AS b, "
        "CAST(p.amount AS INTEGER) AS i, "
        'CAST(p.day AS TIMESTAMP) AS t, p."bank.amount" * 2 AS x, NOT p.flag AS nf '
        "FROM p WHERE p.id IN (3, 4) ORDER BY p.id",
        [(3, 1, True, -6, None, 6, False), (4, None, True, 10, "2024-02-01T00:00:00", 8, None)],
    ),
]


@pytest.mark.parametrize(("sql", "expected"), CASES)
def test_each_construct_gives_the_expected_rows(
    runtime: Runtime, inputs: dict[str, Input], sql: str, expected: list[tuple[Any, ...]]
) -> None:
    assert run(runtime.engine, check_sql(sql, inputs)) == expected


def test_rounding_edges_are_exact_on_both_backends(runtime: Runtime, tenant: Tenant) -> None:
    """Halves away from zero, a quotient a float would misround, int64-sized amounts."""
    source = make_source(
        runtime.engine,
        tenant,
        "a,b\n1.005,1\n-1.005,1\n2.5,1\n-2.5,1\n1,3\n2,3\n-2,3\n"
        "0.000,7\n92233720368547.75807,1000000\n1.015,1\n",
    )
    query = check_sql(
        "SELECT ROUND(t.a / t.b, 2) AS r2, ROUND(t.a / t.b) AS r0, ROUND(t.a, 2) AS a2 FROM t",
        {"t": as_input(source)},
    )
    assert [c.scale for c in query.columns] == [2, 0, 2]
    assert run(runtime.engine, query) == [
        (D("1.01"), 1, D("1.01")),
        (D("-1.01"), -1, D("-1.01")),
        (D("2.50"), 3, D("2.50")),
        (D("-2.50"), -3, D("-2.50")),
        (D("0.33"), 0, D("1.00")),
        (D("0.67"), 1, D("2.00")),
        (D("-0.67"), -1, D("-2.00")),
        (D("0.00"), 0, D("0.00")),
        (D("92233720.37"), 92233720, D("92233720368547.76")),
        (D("1.02"), 1, D("1.02")),
    ]


def test_like_is_case_sensitive_with_backslash_escapes_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "s\nabc\nABC\na_c\na%c\naxc\n")
    query = check_sql(
        "SELECT t.s, t.s LIKE 'a_c' AS one, t.s LIKE 'a\\_c' AS underscore, "
        "t.s LIKE 'a\\%%' AS percent, t.s LIKE 'A%' AS upper FROM t ORDER BY t.s",
        {"t": as_input(source)},
    )
    assert run(runtime.engine, query) == [
        ("ABC", False, False, False, True),
        ("a%c", True, False, True, False),
        ("a_c", True, True, False, False),
        ("abc", True, False, False, False),
        ("axc", True, False, False, False),
    ]


def test_negated_and_case_blind_patterns_keep_their_meaning_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Issue #30: `NOT LIKE` ran as `LIKE` on both backends (sqlglot's `negate` flag was
    dropped); ILIKE (ASCII letters folded, as `lower`), ESCAPE and IS [NOT] DISTINCT FROM
    were refused by sqlglot's class names."""
    source = make_source(
        runtime.engine, tenant, "id,s\n1,abc\n2,ABC\n3,a_c\n4,a%c\n5,\n6,éb\n7,Éb\n"
    )
    query = check_sql(
        "SELECT t.id, t.s NOT LIKE 'a_c' AS a, t.s ILIKE 'A%' AS b, t.s NOT ILIKE 'abc' AS c, "
        "t.s LIKE 'a!%c' ESCAPE '!' AS d, t.s NOT LIKE 'a\\_c' AS e, t.s ILIKE 'éB' AS f, "
        "t.s IS DISTINCT FROM 'abc' AS g, t.s IS NOT DISTINCT FROM NULL AS h FROM t ORDER BY t.id",
        {"t": as_input(source)},
    )
    assert run(runtime.engine, query) == [
        (1, False, True, False, False, True, False, False, False),
        (2, True, True, False, False, True, False, True, False),
        (3, False, True, True, False, False, False, True, False),
        (4, False, True, True, True, True, False, True, False),
        (5, None, None, None, None, None, None, True, True),
        (6, True, False, True, False, True, True, True, False),
        (7, True, False, True, False, True, False, True, False),
    ]


def test_not_like_keeps_the_rows_like_does_not_on_both(runtime: Runtime, tenant: Tenant) -> None:
    """Issue #30's query: `p_type NOT LIKE 'MEDIUM POLISHED%'` counted the LIKE rows."""
    source = make_source(runtime.engine, tenant, "p_type\nMEDIUM POLISHED TIN\nSMALL\nLARGE\n")
    counts = [
        check_sql(
            f"SELECT COUNT(*) AS n FROM part WHERE part.p_type {op} 'MEDIUM POLISHED%'",
            {"part": as_input(source)},
        )
        for op in ("LIKE", "NOT LIKE")
    ]
    assert [run(runtime.engine, q) for q in counts] == [[(1,)], [(2,)]]


TPCH_Q13 = (
    "select c_count, count(*) as custdist from (select c_custkey, count(o_orderkey) "
    "from customer left outer join orders on c_custkey = o_custkey "
    "and o_comment not like '%special%requests%' group by c_custkey) "
    "as c_orders (c_custkey, c_count) group by c_count order by custdist desc, c_count desc"
)
TPCH_Q16 = (
    "select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt "
    "from partsupp, part where p_partkey = ps_partkey and p_brand <> 'Brand#45' "
    "and p_type not like 'MEDIUM POLISHED%' and p_size in (49, 14, 23, 45, 19, 3, 36, 9) "
    "and ps_suppkey not in (select s_suppkey from supplier "
    "where s_comment like '%Customer%Complaints%') "
    "group by p_brand, p_type, p_size order by supplier_cnt desc, p_brand, p_type, p_size"
)


def test_tpch_q13_and_q16_as_written_give_their_rows_on_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    """Issue #30: both queries ran without an error and with the NOT LIKE rows swapped
    for the LIKE ones (a column list after a subquery's alias names its columns)."""
    sources = {
        "customer": "c_custkey\n1\n2\n3\n",
        "orders": "o_orderkey,o_custkey,o_comment\n10,1,fine\n11,1,special requests here\n"
        "12,2,ok\n13,2,ok too\n",
        "part": "p_partkey,p_brand,p_type,p_size\n1,Brand#1,MEDIUM POLISHED TIN,49\n"
        "2,Brand#1,SMALL PLATED,14\n3,Brand#45,SMALL PLATED,14\n4,Brand#2,LARGE,50\n",
        "partsupp": "ps_partkey,ps_suppkey\n1,100\n2,100\n2,101\n2,102\n3,100\n4,100\n",
        "supplier": "s_suppkey,s_comment\n100,good\n101,Customer x Complaints\n102,fine\n",
    }
    inputs = {n: as_input(make_source(runtime.engine, tenant, c)) for n, c in sources.items()}
    assert run(runtime.engine, check_sql(TPCH_Q13, inputs)) == [(2, 1), (1, 1), (0, 1)]
    assert run(runtime.engine, check_sql(TPCH_Q16, inputs)) == [("Brand#1", "SMALL PLATED", 14, 2)]


def test_text_orders_by_bytes_on_both(runtime: Runtime, tenant: Tenant) -> None:
    """Derived text (here from a literal and a number) orders as the columns do."""
    source = make_source(runtime.engine, tenant, "s,n\nb,1\nB,2\na,3\né,4\nZ,5\n")
    query = check_sql(
        "SELECT t.s || '' AS s, MAX(CAST(t.n AS TEXT) || t.s) AS m FROM t "
        "WHERE t.s || '' > 'A' GROUP BY t.s ORDER BY t.s || ''",
        {"t": as_input(source)},
    )
    assert run(runtime.engine, query) == [
        ("B", "2B"),
        ("Z", "5Z"),
        ("a", "3a"),
        ("b", "1b"),
        ("é", "4é"),
    ]


def test_regular_expressions_replace_the_first_match_only(runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, "s,n\nINV-001 INV-002,1\nnone,2\n,3\n")
    query = check_sql(
        "SELECT regexp_replace(t.s, 'INV-([0-9]+)', 'n\\1') AS r, "
        "regexp_replace(t.s, '[0-9]+', '<\\&>') AS w, regexp_substr(t.s, '[0-9]+') AS f, "
        "t.s ~ 'o' AS o FROM t ORDER BY t.n",
        {"t": as_input(source)},
    )
    assert run(runtime.engine, query) == [
        ("n001 INV-002", "INV-<001> INV-002", "001", False),
        ("none", "none", None, True),
        (None, None, None, None),
    ]


def test_a_product_past_int64_fails_the_query_on_both(runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, "a\n92233720368547758.07\n")
    query = check_sql("SELECT t.a * t.a AS square FROM t", {"t": as_input(source)})
    # SQLite: "user-defined function raised exception"; PostgreSQL: "bigint out of range"
    with pytest.raises(sa.exc.DatabaseError, match=r"user-defined function|out of range"):
        run(runtime.engine, query)


def test_distinct_text_ordered_by_its_expression(
    runtime: Runtime, inputs: dict[str, Input]
) -> None:
    query = check_sql(
        "SELECT DISTINCT lower(p.memo) AS m FROM p WHERE p.memo IS NOT NULL ORDER BY lower(p.memo)",
        inputs,
    )
    assert run(runtime.engine, query) == [
        ("alpha",),
        ("alpha-1",),
        ("beta-22",),
        ("delta é",),
        ("gamma",),
    ]


DOC_SETTLEMENTS = (
    "payout_id,currency,amount,fee,status,txn_date,settled_at,items,captured\n"
    "PO-1,EUR,10.00,0.125,settled,2024-01-05,2024-01-05T10:00:00Z,2,true\n"
    "PO-1,EUR,-2.50,0.100,settled,2024-01-06,2024-01-06T11:30:00Z,1,false\n"
    "0PO-2,USD,7.25,,settled,2024-02-01,,3,\n"
)
DOC_BANK = "reference,bank.amount,booked,memo\nPO-1,7.50,2024-01-08,pay  123456 ref\nX,1.00,,\n"


@pytest.mark.parametrize("sql", DOC_EXAMPLES)
def test_every_documented_example_runs_alike_on_both(
    runtime: Runtime, tenant: Tenant, sql: str
) -> None:
    inputs = {
        "s": as_input(make_source(runtime.engine, tenant, DOC_SETTLEMENTS)),
        "b": as_input(make_source(runtime.engine, tenant, DOC_BANK)),
    }
    query = check_sql(sql, inputs)
    assert [c.type for c in query.columns] == [c.type for c in check_sql(sql, DOC_INPUTS).columns]
    rows = run(runtime.engine, query)
    assert rows == run(runtime.engine, query)  # and each value in its stored form (run checks)
    assert len(rows) >= 1


def test_new_rows_alone_appended_equal_a_full_recompute(runtime: Runtime, tenant: Tenant) -> None:
    first = make_source(runtime.engine, tenant, "ref,amount\nA,1.50\nB,-2.25\n")
    second = make_source(runtime.engine, tenant, "ref,amount\nC,3.00\n")
    inputs = {"a": as_input(first), "b": as_input(second)}
    query = check_sql(
        "SELECT a.ref, a.amount * 2 AS twice FROM a WHERE a.amount > 0 "
        "UNION ALL SELECT b.ref, b.amount FROM b",
        inputs,
    )
    assert query.is_incremental
    before = run(runtime.engine, query)
    with runtime.engine.connect() as conn:
        marks = {
            r.id: conn.exec_driver_sql(f"SELECT MAX(_row_id) FROM {r.table_name}").scalar_one()
            for r in (first, second)
        }
    append(runtime.engine, first, "ref,amount\nD,4.25\nE,-1.00\n")
    append(runtime.engine, second, "ref,amount\nF,0.10\n")
    postgresql = runtime.engine.dialect.name == "postgresql"
    with runtime.engine.connect() as conn:
        sql = query.statement(forms_of(conn), after_row_ids=marks)
        new = [
            tuple(value_of(c, v, postgresql) for c, v in zip(query.columns, r, strict=True))
            for r in fetch_query_rows(conn, sql)
        ]
    assert new == [("D", D("8.50")), ("F", D("0.10"))]
    assert sorted(before + new) == sorted(run(runtime.engine, query))


def append(engine: Engine, resource: Resource, content: str) -> None:
    path = write_file(content)
    try:
        with write_connection(engine) as conn, conn.begin():
            load_into(conn, resource.id, path)
    finally:
        path.unlink()


def test_intervals_shift_timestamps_and_dates_alike(runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(
        runtime.engine, tenant, "at,day\n2024-01-05T23:30:00.25,2024-02-28\n2024-12-31T12:00:00,\n"
    )
    query = check_sql(
        "SELECT t.at + INTERVAL '1 hour' AS a, t.at - INTERVAL '90 minutes' AS b, "
        "t.at + INTERVAL '2 days' AS c, t.day + INTERVAL '2 days' AS d, "
        "t.at + INTERVAL '-30 seconds' AS e FROM t ORDER BY t.at",
        {"t": as_input(source)},
    )
    assert run(runtime.engine, query) == [
        (
            "2024-01-06T00:30:00.25",
            "2024-01-05T22:00:00.25",
            "2024-01-07T23:30:00.25",
            "2024-03-01",
            "2024-01-05T23:29:30.25",
        ),
        (
            "2024-12-31T13:00:00",
            "2024-12-31T10:30:00",
            "2025-01-02T12:00:00",
            None,
            "2024-12-31T11:59:30",
        ),
    ]


def test_a_condition_of_and_inside_a_form_keeps_its_parentheses(
    runtime: Runtime, tenant: Tenant
) -> None:
    """`CAST(a AND b AS INTEGER)` was `CASE WHEN a AND b THEN 1 WHEN NOT a AND b THEN 0
    END`: NULL for true and false (sqlglot counts AND as a call, written bare)."""
    source = make_source(runtime.engine, tenant, "a,b\ntrue,false\nfalse,true\ntrue,true\n")
    query = check_sql(
        "SELECT CAST(t.a AND t.b AS INTEGER) AS x, CAST(t.a OR t.b AS INTEGER) AS y FROM t",
        {"t": as_input(source)},
    )
    assert sorted(run(runtime.engine, query)) == [(0, 1), (0, 1), (1, 1)]
