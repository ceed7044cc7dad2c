"""Random tables and a set of transformation queries: SQLite's rows, PostgreSQL's rows
and a plain Python reference (exact Fractions, half away from zero) are the same.

Each example loads a small CSV through the real loader, then runs every query's
translated SQL on the backend under test and compares it with the reference; the test
runs once per backend, so both equal the reference and each other.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from support.factories import Tenant, make_source
from tally.core.columns import ColumnType
from tally.runtime import Runtime
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import check_sql
from tally.storage.sql_forms import forms_of
from tally.storage.transformation_sql import fetch_query_rows

EXAMPLES = int(os.environ.get("TALLY_PROPERTY_EXAMPLES", "25"))
PHASES = tuple(p for p in Phase if p is not Phase.shrink or os.environ.get("TALLY_PROPERTY_SHRINK"))
Row = dict[str, Any]  # rid, k (str | None), a, b (Decimal | None), n (int | None), d


def _row(rid: int, first: bool) -> st.SearchStrategy[Row]:
    def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return strategy if first else st.one_of(st.none(), strategy)

    return st.fixed_dictionaries(
        {
            "rid": st.just(rid),
            "k": maybe(st.text("aAbé", min_size=1, max_size=2)),
            "a": maybe(st.integers(-(10**6), 10**6).map(lambda u: Decimal(u).scaleb(-2))),
            "b": maybe(st.integers(-3000, 3000).map(lambda u: Decimal(u).scaleb(-3))),
            "n": maybe(st.integers(-40, 40)),
            "d": maybe(st.dates(dt.date(2000, 1, 1), dt.date(2030, 12, 31))),
        }
    )


@st.composite
def tables(draw: st.DrawFn) -> list[Row]:
    size = draw(st.integers(1, 8))
    return [draw(_row(i + 1, i == 0)) for i in range(size)]


def csv_of(rows: list[Row]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return ""
        return f"{value:f}" if isinstance(value, Decimal) else str(value)

    lines = ["rid,k,a,b,n,d"] + [
        ",".join(cell(r[c]) for c in ["rid", "k", "a", "b", "n", "d"]) for r in rows
    ]
    return "\n".join(lines) + "\n"


# --- the reference ---------------------------------------------------------------------


def rounded(value: Fraction | Decimal | None, scale: int) -> Decimal | None:
    """Half away from zero, exactly."""
    if value is None:
        return None
    exact = Fraction(value) * 10**scale
    units = math.floor(abs(exact) + Fraction(1, 2))
    return Decimal(units if exact >= 0 else -units).scaleb(-scale)


def divided(num: Any, den: Any, scale: int) -> Decimal | None:
    if num is None or den is None or den == 0:
        return None
    return rounded(Fraction(num) / Fraction(den), scale)


def total(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present[1:], present[0]) if present else None


def groups(rows: list[Row]) -> list[tuple[str | None, list[Row]]]:
    keys = sorted({r["k"] for r in rows}, key=lambda k: (k is None, k or ""))
    return [(k, [r for r in rows if r["k"] == k]) for k in keys]


def ascii_upper(text: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in text)


def _grouped(rows: list[Row]) -> list[tuple[Any, ...]]:
    out = []
    for key, members in groups(rows):
        a = [r["a"] for r in members]
        b = [r["b"] for r in members]
        present_b = [v for v in b if v is not None]
        out.append(
            (
                key,
                total(a),
                len(members),
                len([v for v in a if v is not None]),
                min(present_b) if present_b else None,
                max(present_b) if present_b else None,
            )
        )
    return out


def _arithmetic(rows: list[Row]) -> list[tuple[Any, ...]]:
    def both(x: Any, y: Any, f: Callable[[Any, Any], Any]) -> Any:
        return None if x is None or y is None else f(x, y)

    return [
        (
            r["rid"],
            both(r["a"], r["b"], lambda x, y: x * y),
            both(r["a"], r["b"], lambda x, y: x + y),
            both(r["a"], r["n"], lambda x, y: x - y),
            divided(r["a"], r["b"], 2),
            divided(r["a"], r["n"], 4),
            rounded(r["b"], 1),
        )
        for r in rows
    ]


def _averages(rows: list[Row]) -> list[tuple[Any, ...]]:
    out = []
    for key, members in groups(rows):
        a = [r["a"] for r in members if r["a"] is not None]
        products = [r["a"] * r["b"] for r in members if r["a"] is not None and r["b"] is not None]
        mean = divided(sum(a), len(a), 3) if a else None
        weights = total([r["b"] for r in members])
        weighted = divided(total(products), weights, 4) if products else None
        out.append((key, mean, weighted))
    return out


def _running(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [
        (r["rid"], total([s["a"] for s in rows if s["k"] == r["k"] and s["rid"] <= r["rid"]]))
        for r in rows
    ]


def _case(rows: list[Row]) -> list[tuple[Any, ...]]:
    chosen = [r for r in rows if r["n"] is not None and r["n"] >= 0 and r["a"] is not None]
    return [
        (r["rid"], r["a"] if r["b"] is not None and r["a"] > r["b"] else r["b"]) for r in chosen
    ]


def _dates(rows: list[Row]) -> list[tuple[Any, ...]]:
    def later(r: Row) -> str | None:
        if r["d"] is None or r["n"] is None:
            return None
        return (r["d"] + dt.timedelta(days=r["n"])).isoformat()

    return [(r["rid"], later(r), r["d"].month if r["d"] else None) for r in rows]


def _labels(rows: list[Row]) -> list[tuple[Any, ...]]:
    def label(r: Row) -> str | None:
        if r["k"] is None or r["a"] is None:
            return None
        return f"{ascii_upper(r['k'])}-{r['a']:f}"

    return [(r["rid"], label(r)) for r in rows]


def _membership(rows: list[Row]) -> list[tuple[Any, ...]]:
    def kept(r: Row) -> bool:
        a, b = r["a"], r["b"]
        return (a is not None and a in (Decimal("1.5"), Decimal(-2), Decimal("0.25"))) or (
            b is not None and Decimal("-0.5") <= b <= Decimal("0.5")
        )

    return [(r["rid"],) for r in rows if kept(r)]


def _coalesced(rows: list[Row]) -> list[tuple[Any, ...]]:
    def first(*values: Any) -> Any:
        return next((v for v in values if v is not None), None)

    return [(r["rid"], first(r["a"], r["b"], Decimal(0))) for r in rows]


def _stacked(rows: list[Row]) -> list[tuple[Any, ...]]:
    values = [r["a"] for r in rows] + [r["b"] for r in rows]
    return [(v,) for v in sorted(values, key=lambda v: (v is None, v or 0))]


def _text_groups(rows: list[Row]) -> list[tuple[Any, ...]]:
    counted = [(k, len(m)) for k, m in groups(rows) if k is not None and k > "a"]
    return sorted(counted, reverse=True)


def _pairs(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [
        (x["rid"], y["rid"])
        for x in rows
        for y in rows
        if x["k"] is not None and x["k"] == y["k"] and x["rid"] < y["rid"]
    ]


def _scaled_products(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [
        (
            r["rid"],
            divided(r["a"] * r["b"], 7, 3) if r["a"] is not None and r["b"] is not None else None,
        )
        for r in rows
    ]


QUERIES: list[tuple[str, Callable[[list[Row]], list[tuple[Any, ...]]]]] = [
    (
        "SELECT t.k, SUM(t.a) AS s, COUNT(*) AS c, COUNT(t.a) AS ca, MIN(t.b) AS lo, "
        "MAX(t.b) AS hi FROM t GROUP BY t.k ORDER BY t.k",
        _grouped,
    ),
    (
        "SELECT t.rid, t.a * t.b AS p, t.a + t.b AS q, t.a - t.n AS r, ROUND(t.a / t.b, 2) AS dv, "
        "CAST(t.a / t.n AS DECIMAL(18, 4)) AS dn, ROUND(t.b, 1) AS rb FROM t ORDER BY t.rid",
        _arithmetic,
    ),
    (
        "SELECT t.k, ROUND(AVG(t.a), 3) AS m, ROUND(SUM(t.a * t.b) / SUM(t.b), 4) AS w "
        "FROM t GROUP BY t.k ORDER BY t.k",
        _averages,
    ),
    (
        "SELECT t.rid, SUM(t.a) OVER (PARTITION BY t.k ORDER BY t.rid) AS run FROM t "
        "ORDER BY t.rid",
        _running,
    ),
    (
        "SELECT t.rid, CASE WHEN t.a > t.b THEN t.a ELSE t.b END AS mx FROM t "
        "WHERE t.n >= 0 AND t.a IS NOT NULL ORDER BY t.rid",
        _case,
    ),
    (
        "SELECT t.rid, t.d + t.n AS later, EXTRACT(MONTH FROM t.d) AS m FROM t ORDER BY t.rid",
        _dates,
    ),
    ("SELECT t.rid, upper(t.k) || '-' || t.a AS label FROM t ORDER BY t.rid", _labels),
    (
        "SELECT t.rid FROM t WHERE t.a IN (1.5, -2, 0.25) OR t.b BETWEEN -0.5 AND 0.5 "
        "ORDER BY t.rid",
        _membership,
    ),
    ("SELECT t.rid, COALESCE(t.a, t.b, 0) AS c FROM t ORDER BY t.rid", _coalesced),
    (
        "SELECT u.v FROM (SELECT t.a AS v FROM t UNION ALL SELECT t.b FROM t) u ORDER BY u.v",
        _stacked,
    ),
    (
        "SELECT t.k, COUNT(*) AS n FROM t WHERE t.k > 'a' GROUP BY t.k ORDER BY t.k DESC",
        _text_groups,
    ),
    (
        "SELECT x.rid, y.rid AS other FROM t x JOIN t y ON x.k = y.k AND x.rid < y.rid "
        "ORDER BY x.rid, y.rid",
        _pairs,
    ),
    ("SELECT t.rid, ROUND(t.a * t.b / 7, 3) AS r FROM t ORDER BY t.rid", _scaled_products),
]


def as_python(kind: ColumnType, scale: int, value: Any) -> Any:
    if value is None or kind is not ColumnType.DECIMAL:
        return value
    return value if isinstance(value, Decimal) else Decimal(value).scaleb(-scale)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=tables())
def test_queries_give_the_reference_rows(runtime: Runtime, tenant: Tenant, rows: list[Row]) -> None:
    content = csv_of(rows)
    note(content)
    source = make_source(runtime.engine, tenant, content)
    inputs = {"t": Input(source.id, source.columns)}
    for sql, reference in QUERIES:
        query = check_sql(sql, inputs)
        with runtime.engine.connect() as conn:
            got = fetch_query_rows(conn, query.statement(forms_of(conn)))
        typed = [
            tuple(as_python(c.type, c.scale, v) for c, v in zip(query.columns, r, strict=True))
            for r in got
        ]
        assert typed == reference(rows), sql
