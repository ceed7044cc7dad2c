"""Random texts read as numbers and dates by a transformation (issue #32 point 2): on
SQLite and on PostgreSQL, `parse_decimal` with random separators, CAST to a decimal of a
random scale, CAST to an integer, `to_date` with a random format and CAST to a date each
give what a plain Python model of the documented grammar gives (NULL under TRY_CAST for
a text that does not fit), digit for digit.

The texts are well-formed ones (signs, grouped or plain digits, fractions, whitespace
around) and their mutations (a character inserted, removed or swapped). Each example
loads them through the real loader as a text column, reads back what it stored, and runs
the query through the path a preview takes; the test runs once per backend.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
from decimal import ROUND_HALF_UP, Context, Decimal

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
SPACE = " \t\n\r\f\v"
DIGITS = "0123456789"
INT64_MAX = 2**63 - 1
SEPARATORS = [
    (".", ""),
    (",", "."),
    (".", ","),
    (",", " "),
    (".", "'"),
    (",", "\u00a0"),
    (",", "\u202f"),
]
SPACES = " \u00a0\u202f"  # a space separator accepts any of them
FORMATS = ["DD/MM/YYYY", "MM/DD/YYYY", "YYYYMMDD", "DD.MM.YYYY", "YYYY-MM-DD", "DD MM YYYY"]
NOISE = "0123456789.,-+ '/x\u00a0\u202f\t"


# --- the model -------------------------------------------------------------------------


def model_number(text: str | None, point: str | None, thousands: str, scale: int) -> Decimal | None:
    """The value the grammar gives (docs/transformations.md), rounded half away from zero
    at `scale`; None when the text does not fit. `point` None: a whole number."""
    if text is None:
        return None
    body = text.strip(SPACE)
    sign = ""
    if body[:1] in ("+", "-"):
        sign, body = body[0], body[1:]
    whole, found, fraction = body.partition(point) if point else (body, "", "")
    if point and point in fraction:
        return None
    if not (whole or fraction) or any(c not in DIGITS for c in fraction):
        return None
    if whole and any(c not in DIGITS for c in whole):
        if thousands and thousands in SPACES:
            whole = whole.replace("\u00a0", thousands).replace("\u202f", thousands)
            whole = whole.replace(" ", thousands)
        groups = whole.split(thousands) if thousands else [whole]
        if len(groups) < 2 or not 1 <= len(groups[0]) <= 3:
            return None
        if any(len(g) != 3 for g in groups[1:]) or any(c not in DIGITS for c in "".join(groups)):
            return None
        whole = "".join(groups)
    elif not whole and not found:
        return None
    if len(text) > 1000:  # out of range, whatever the digits
        return None
    value = Decimal(f"{sign}{whole or '0'}.{fraction or '0'}")
    exact = Context(prec=1000, rounding=ROUND_HALF_UP)
    rounded = value.quantize(Decimal(1).scaleb(-scale), context=exact)
    if abs(rounded.scaleb(scale, context=exact)) > INT64_MAX:
        return None
    return rounded


def model_date(text: str | None, written: str, *, flexible: bool = True) -> str | None:
    """The ISO date the format reads, or None."""
    if text is None:
        return None
    body, pieces, parts = text.strip(SPACE), _pieces(written), {}
    for index, piece in enumerate(pieces):
        if piece in ("YYYY", "MM", "DD"):
            following = pieces[index + 1] if index + 1 < len(pieces) else None
            short = piece != "YYYY" and flexible and following not in ("YYYY", "MM", "DD")
            width = 4 if piece == "YYYY" else 2
            taken = 0
            while taken < width and taken < len(body) and body[taken] in DIGITS:
                taken += 1
            if taken != width and not (short and taken >= 1):
                return None
            parts[piece], body = int(body[:taken]), body[taken:]
        elif not body.startswith(piece):
            return None
        else:
            body = body[1:]
    if body:
        return None
    try:
        return dt.date(parts["YYYY"], parts["MM"], parts["DD"]).isoformat()
    except ValueError:
        return None


def _pieces(written: str) -> list[str]:
    pieces = []
    while written:
        token = next((t for t in ("YYYY", "MM", "DD") if written.startswith(t)), written[0])
        pieces.append(token)
        written = written[len(token) :]
    return pieces


# --- texts -------------------------------------------------------------------------------


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    """The text, or it with a character inserted, removed or replaced."""
    how = draw(st.sampled_from(["same", "same", "insert", "remove", "replace"]))
    if how == "same" or (not text and how != "insert"):
        return text
    at = draw(st.integers(0, max(len(text) - (how != "insert"), 0)))
    char = draw(st.sampled_from(NOISE))
    if how == "insert":
        return text[:at] + char + text[at:]
    return text[:at] + (char if how == "replace" else "") + text[at + 1 :]


@st.composite
def number_texts(draw: st.DrawFn, point: str, thousands: str) -> str:
    whole = draw(st.text(DIGITS, max_size=20))
    if thousands and whole and draw(st.booleans()):
        whole = whole.lstrip("0") or "0"
        head = len(whole) % 3 or 3
        groups = [whole[i : i + 3] for i in range(head, len(whole), 3)]
        written = st.sampled_from(SPACES) if thousands in SPACES else st.just(thousands)
        whole = whole[:head] + "".join(draw(written) + group for group in groups)
    fraction = draw(st.text(DIGITS, max_size=6))
    text = draw(st.sampled_from(["", "", "+", "-"])) + whole
    if fraction or draw(st.booleans()):
        text += point + fraction
    pad = st.text(SPACE[:2], max_size=2)
    return draw(mutated(draw(pad) + text + draw(pad)))


@st.composite
def date_texts(draw: st.DrawFn, written: str) -> str:
    year, month, day = (
        draw(st.integers(0, 9999)),
        draw(st.integers(0, 13)),
        draw(st.integers(0, 32)),
    )
    text = written.replace("YYYY", f"{year:04d}")
    for token, value in (("MM", month), ("DD", day)):
        text = text.replace(token, f"{value:02d}" if draw(st.booleans()) else str(value), 1)
    return draw(mutated(text))


def csv_of(values: list[str]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["k", "v"])
    writer.writerow([0, "zz"])  # the column stays text whatever the others hold
    for k, value in enumerate(values, start=1):
        writer.writerow([k, value])
    return out.getvalue()


def stored(runtime: Runtime, tenant: Tenant, values: list[str]) -> tuple[Input, list[str | None]]:
    """A source of the values, and each as the loader stored it (row k)."""
    source = make_source(runtime.engine, tenant, csv_of(values))
    inputs = Input(source.id, source.columns)
    query = check_sql("SELECT t.v FROM t WHERE t.k > 0 ORDER BY t.k", {"t": inputs})
    with runtime.engine.connect() as conn:
        texts = [r[0] for r in fetch_query_rows(conn, query.statement(forms_of(conn)))]
    return inputs, texts


def results(runtime: Runtime, inputs: Input, sql: str) -> list[tuple[object, ...]]:
    query = check_sql(sql, {"t": inputs})
    with runtime.engine.connect() as conn:
        return [tuple(r) for r in fetch_query_rows(conn, query.statement(forms_of(conn)))]


def as_decimal(value: object, scale: int) -> Decimal | None:
    """A stored decimal (SQLite's scaled integer, PostgreSQL's NUMERIC) as its value."""
    if value is None:
        return None
    if isinstance(value, int):
        return Decimal(value).scaleb(-scale)
    assert isinstance(value, Decimal)
    return value


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def number_cases(draw: st.DrawFn) -> tuple[str, str, int, list[str]]:
    point, thousands = draw(st.sampled_from(SEPARATORS))
    texts = draw(st.lists(number_texts(point, thousands), min_size=1, max_size=8))
    return point, thousands, draw(st.integers(0, 4)), texts


@SETTINGS
@given(case=number_cases())
def test_numbers_read_from_text_equal_the_model(
    runtime: Runtime, tenant: Tenant, case: tuple[str, str, int, list[str]]
) -> None:
    point, thousands, scale, texts = case
    inputs, values = stored(runtime, tenant, texts)
    note(repr(values))
    quoted = thousands.replace("'", "''")
    sql = (
        f"SELECT TRY_CAST(parse_decimal(t.v, '{point}', '{quoted}')"
        f" AS DECIMAL(18, {scale})) AS p, TRY_CAST(t.v AS DECIMAL(18, {scale})) AS c,"
        " TRY_CAST(t.v AS INTEGER) AS i FROM t WHERE t.k > 0 ORDER BY t.k"
    )
    got = [
        (as_decimal(p, scale), as_decimal(c, scale), None if i is None else int(str(i)))
        for p, c, i in results(runtime, inputs, sql)
    ]
    expected = []
    for value in values:
        whole = model_number(value, None, "", 0)
        expected.append(
            (
                model_number(value, point, thousands, scale),
                model_number(value, ".", "", scale),
                None if whole is None else int(whole),
            )
        )
    assert got == expected, sql


@st.composite
def date_cases(draw: st.DrawFn) -> tuple[str, list[str]]:
    written = draw(st.sampled_from(FORMATS))
    return written, draw(st.lists(date_texts(written), min_size=1, max_size=8))


@SETTINGS
@given(case=date_cases())
def test_dates_read_from_text_equal_the_model(
    runtime: Runtime, tenant: Tenant, case: tuple[str, list[str]]
) -> None:
    written, texts = case
    inputs, values = stored(runtime, tenant, texts)
    note(repr(values))
    sql = (
        f"SELECT TRY_CAST(to_date(t.v, '{written}') AS DATE) AS f, TRY_CAST(t.v AS DATE) AS iso"
        " FROM t WHERE t.k > 0 ORDER BY t.k"
    )
    expected = [
        (model_date(v, written), model_date(v, "YYYY-MM-DD", flexible=False)) for v in values
    ]
    assert results(runtime, inputs, sql) == expected, sql
