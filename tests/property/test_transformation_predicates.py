"""Random predicates over random rows: each predicate's value (TRUE, FALSE or NULL) on
SQLite and on PostgreSQL equals a plain Python model of SQL's three-valued logic
(issue #30: `x NOT LIKE 'p'` ran as `x LIKE 'p'` on both).

The predicates mix [NOT] LIKE and [NOT] ILIKE (`%`, `_`, escapes, ESCAPE), comparisons,
IS [NOT] DISTINCT FROM, [NOT] IN lists holding NULL, [NOT] BETWEEN [SYMMETRIC],
IS [NOT] NULL, and AND / OR / NOT over them. Each example loads a small CSV through the
real loader, then runs the query through the path a preview takes (check_sql, the
backend's SQL, the database); the test runs once per backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from support.factories import Tenant, make_source
from tally.runtime import Runtime
from tally.services.transformations.dialect import Input
from tally.services.transformations.query import check_sql
from tally.storage.sql_forms import forms_of
from tally.storage.transformation_sql import fetch_query_rows

EXAMPLES = int(os.environ.get("TALLY_PROPERTY_EXAMPLES", "25"))
PHASES = tuple(p for p in Phase if p is not Phase.shrink or os.environ.get("TALLY_PROPERTY_SHRINK"))
Row = dict[str, Any]  # rid; t, u text; n integer; d decimal(2): each may be None
Truth = bool | None
TEXT = "aAb_%\\!éÉ"  # LIKE's wildcards and escapes, and a letter ASCII folding leaves alone


@dataclass(frozen=True)
class Predicate:
    sql: str
    value: Callable[[Row], Truth]


# --- rows ------------------------------------------------------------------------------


def _texts() -> st.SearchStrategy[str]:
    return st.text(TEXT, min_size=1, max_size=4).filter(lambda s: any(c.isalpha() for c in s))


def _row(rid: int, first: bool) -> st.SearchStrategy[Row]:
    def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return strategy if first else st.one_of(st.none(), strategy)

    return st.fixed_dictionaries(
        {
            "rid": st.just(rid),
            "t": maybe(_texts()),
            "u": maybe(_texts()),
            "n": maybe(st.integers(-4, 4)),
            "d": maybe(st.integers(-300, 300).map(lambda v: Decimal(v).scaleb(-2))),
        }
    )


@st.composite
def tables(draw: st.DrawFn) -> list[Row]:
    return [draw(_row(i + 1, i == 0)) for i in range(draw(st.integers(1, 8)))]


def csv_of(rows: list[Row]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return ""
        return f"{value:f}" if isinstance(value, Decimal) else str(value)

    names = ["rid", "t", "u", "n", "d"]
    return "\n".join([",".join(names)] + [",".join(cell(r[c]) for c in names) for r in rows]) + "\n"


# --- the model: three-valued logic -----------------------------------------------------


def both(a: Truth, b: Truth) -> Truth:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def either(a: Truth, b: Truth) -> Truth:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def negated(a: Truth) -> Truth:
    return None if a is None else not a


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def compared(a: Any, op: str, b: Any) -> Truth:
    return None if a is None or b is None else COMPARE[op](a, b)


def ascii_folded(text: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in text)


def like(text: str | None, units: list[tuple[str, str]], *, fold: bool) -> Truth:
    """Whether the whole text matches the pattern's units: ("char", c), ("one", ""),
    ("any", ""), by dynamic programming over (text position, unit)."""
    if text is None:
        return None
    if fold:
        text = ascii_folded(text)
        units = [(kind, ascii_folded(c)) for kind, c in units]
    reach = {0}
    for kind, char in units:
        if kind == "any":
            reach = set(range(min(reach), len(text) + 1)) if reach else set()
        else:
            reach = {i + 1 for i in reach if i < len(text) and (kind == "one" or text[i] == char)}
    return len(text) in reach


# --- predicates ------------------------------------------------------------------------


def sql_text(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("'", "''") + "'"


def sql_number(value: Decimal | int | None) -> str:
    return "NULL" if value is None else str(value)


@st.composite
def likes(draw: st.DrawFn) -> Predicate:
    escape = draw(st.sampled_from([None, "!", "\\", ""]))  # None: no ESCAPE clause
    char = "\\" if escape is None else escape
    units = draw(
        st.lists(
            st.one_of(
                st.sampled_from(TEXT).map(lambda c: ("char", c)),
                st.just(("one", "")),
                st.just(("any", "")),
            ),
            max_size=4,
        )
    )
    written, modelled = [], []
    for kind, c in units:
        wildcard = {"one": "_", "any": "%"}.get(kind)
        if wildcard is not None:
            written.append(wildcard)
        elif char and (c in "%_" or c == char):
            written.append(char + c)  # escaped: the character itself
        elif c in "%_":  # ESCAPE '': `%` and `_` are always wildcards
            written.append(c)
            kind = "any" if c == "%" else "one"
        else:
            written.append(c)
        modelled.append((kind, c))
    pattern = "".join(written)
    column = draw(st.sampled_from(["t", "u"]))
    operator = draw(st.sampled_from(["LIKE", "NOT LIKE", "ILIKE", "NOT ILIKE"]))
    clause = "" if escape is None else f" ESCAPE {sql_text(escape)}"
    fold, negate = "ILIKE" in operator, operator.startswith("NOT")

    def value(row: Row) -> Truth:
        matched = like(row[column], modelled, fold=fold)
        return negated(matched) if negate else matched

    return Predicate(f"t.{column} {operator} {sql_text(pattern)}{clause}", value)


NUMBERS = st.one_of(
    st.none(),
    st.integers(-4, 4),
    st.sampled_from([Decimal("1.5"), Decimal("-0.25"), Decimal("2.00"), Decimal("0.005")]),
)


@st.composite
def comparisons(draw: st.DrawFn) -> Predicate:
    op = draw(st.sampled_from(sorted(COMPARE)))
    if draw(st.booleans()):
        left = draw(st.sampled_from(["t", "u"]))
        right_text = draw(st.one_of(st.sampled_from(["t", "u"]), _texts()))
        right_sql = f"t.{right_text}" if right_text in ("t", "u") else sql_text(right_text)

        def text_value(row: Row) -> Truth:
            other = row[right_text] if right_text in ("t", "u") else right_text
            return compared(row[left], op, other)

        return Predicate(f"t.{left} {op} {right_sql}", text_value)
    column = draw(st.sampled_from(["n", "d"]))
    number = draw(st.one_of(NUMBERS.filter(lambda v: v is not None), st.sampled_from(["n", "d"])))
    right = f"t.{number}" if isinstance(number, str) else sql_number(number)

    def number_value(row: Row) -> Truth:
        return compared(row[column], op, row[number] if isinstance(number, str) else number)

    return Predicate(f"t.{column} {op} {right}", number_value)


@st.composite
def distinct_from(draw: st.DrawFn) -> Predicate:
    negate = draw(st.booleans())
    if draw(st.booleans()):
        left, right = "t", draw(st.one_of(st.just("u"), st.none(), _texts()))
        right_sql = "t.u" if right == "u" else sql_text(right)
    else:
        left, right = draw(st.sampled_from(["n", "d"])), draw(st.one_of(NUMBERS, st.just("d")))
        right_sql = "t.d" if right == "d" else sql_number(right)

    def value(row: Row) -> Truth:
        other = row[right] if right in ("u", "d") else right
        same = (
            row[left] == other
            if row[left] is not None and other is not None
            else (row[left] is None and other is None)
        )
        return same if negate else not same

    operator = "IS NOT DISTINCT FROM" if negate else "IS DISTINCT FROM"
    return Predicate(f"t.{left} {operator} {right_sql}", value)


@st.composite
def memberships(draw: st.DrawFn) -> Predicate:
    negate = draw(st.booleans())
    if draw(st.booleans()):
        column = draw(st.sampled_from(["t", "u"]))
        items: list[Any] = draw(st.lists(st.one_of(st.none(), _texts()), min_size=1, max_size=3))
        listed = ", ".join(sql_text(i) for i in items)
    else:
        column = draw(st.sampled_from(["n", "d"]))
        items = draw(st.lists(NUMBERS, min_size=1, max_size=3))
        listed = ", ".join(sql_number(i) for i in items)

    def value(row: Row) -> Truth:
        x = row[column]
        if x is None:
            found: Truth = None
        elif any(i is not None and i == x for i in items):
            found = True
        else:
            found = None if any(i is None for i in items) else False
        return negated(found) if negate else found

    return Predicate(f"t.{column} {'NOT IN' if negate else 'IN'} ({listed})", value)


@st.composite
def betweens(draw: st.DrawFn) -> Predicate:
    column = draw(st.sampled_from(["n", "d"]))
    low, high = draw(NUMBERS), draw(NUMBERS)
    negate, symmetric = draw(st.booleans()), draw(st.booleans())

    def inside(x: Any, lo: Any, hi: Any) -> Truth:
        return both(compared(x, ">=", lo), compared(x, "<=", hi))

    def value(row: Row) -> Truth:
        x = row[column]
        found = inside(x, low, high)
        if symmetric:
            found = either(found, inside(x, high, low))
        return negated(found) if negate else found

    words = ("NOT " if negate else "") + "BETWEEN" + (" SYMMETRIC" if symmetric else "")
    return Predicate(f"t.{column} {words} {sql_number(low)} AND {sql_number(high)}", value)


@st.composite
def nulls(draw: st.DrawFn) -> Predicate:
    column, negate = draw(st.sampled_from(["t", "u", "n", "d"])), draw(st.booleans())
    return Predicate(
        f"t.{column} IS {'NOT ' if negate else ''}NULL",
        lambda row: (row[column] is not None) if negate else (row[column] is None),
    )


ATOMS = st.one_of(likes(), comparisons(), distinct_from(), memberships(), betweens(), nulls())


def _combined(children: st.SearchStrategy[Predicate]) -> st.SearchStrategy[Predicate]:
    def pair(kind: str) -> st.SearchStrategy[Predicate]:
        join = both if kind == "AND" else either
        return st.tuples(children, children).map(
            lambda ab: Predicate(
                f"({ab[0].sql}) {kind} ({ab[1].sql})",
                lambda row: join(ab[0].value(row), ab[1].value(row)),
            )
        )

    inverted = children.map(
        lambda p: Predicate(f"NOT ({p.sql})", lambda row: negated(p.value(row)))
    )
    return st.one_of(pair("AND"), pair("OR"), inverted)


PREDICATES = st.recursive(ATOMS, _combined, max_leaves=4)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=tables(), predicates=st.lists(PREDICATES, min_size=1, max_size=6))
def test_predicates_give_the_three_valued_reference(
    runtime: Runtime, tenant: Tenant, rows: list[Row], predicates: list[Predicate]
) -> None:
    content = csv_of(rows)
    note(content)
    source = make_source(runtime.engine, tenant, content)
    inputs = {"t": Input(source.id, source.columns)}
    values = ", ".join(f"{p.sql} AS v{i}" for i, p in enumerate(predicates))
    queries = [  # each value, and the rows the first keeps as a filter (issue #30's place)
        f"SELECT t.rid, {values} FROM t ORDER BY t.rid",
        f"SELECT t.rid FROM t WHERE {predicates[0].sql} ORDER BY t.rid",
    ]
    expected = [
        [(r["rid"], *(p.value(r) for p in predicates)) for r in rows],
        [(r["rid"],) for r in rows if predicates[0].value(r) is True],
    ]
    for sql, reference in zip(queries, expected, strict=True):
        note(sql)
        query = check_sql(sql, inputs)
        with runtime.engine.connect() as conn:
            got = fetch_query_rows(conn, query.statement(forms_of(conn)))
        truths = [(r[0], *(None if v is None else bool(v) for v in r[1:])) for r in got]
        assert truths == reference, sql
