"""A formatted decimal column loads to exactly the values of its clean twin (issue #32,
point 1): whatever the separators and negative forms a source declares, the numbers a
file writes in them are stored as the same exact values as the file written plainly
(`-1234.56`), on both backends; and the conversion alone, on many more examples. The
same holds for a whole bank statement: lines of anything above the header, a date
column in a declared format, the amounts, and totals records below."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.factories import Tenant, read_data, write_file
from tally.core.formats import ColumnFormat, NumberFormat, converter_of
from tally.runtime import Runtime

SPACES = (" ", "\u00a0", "\u202f")
_names = itertools.count()


@dataclass(frozen=True)
class Written:
    """A number format, and how each value of a file is written in it."""

    number: NumberFormat
    values: list[Decimal]
    texts: list[str]

    def declared(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "type": "decimal",
            "scale": 6,
            "decimal_separator": self.number.decimal_separator,
            "thousands_separator": self.number.thousands_separator,
            "negative": list(self.number.negative),
        }


amounts = st.integers(min_value=0, max_value=6).flatmap(
    lambda places: st.decimals(
        min_value=Decimal("-999999999999"),
        max_value=Decimal("999999999999"),
        places=places,
        allow_nan=False,
        allow_infinity=False,
    )
)


@st.composite
def written(draw: st.DrawFn) -> Written:
    decimal = draw(st.sampled_from([".", ","]))
    thousands = draw(
        st.sampled_from([t for t in ("", ",", ".", " ", "'", "\u00a0") if t != decimal])
    )
    negative = tuple(
        draw(
            st.lists(
                st.sampled_from(["minus", "trailing_minus", "parentheses", "dr_cr"]),
                min_size=1,
                max_size=4,
                unique=True,
            )
        )
    )
    number = NumberFormat(decimal, thousands, negative)
    values = draw(st.lists(amounts | st.just(Decimal("-0.5")), min_size=1, max_size=30))
    texts = [_write(draw, number, value) for value in values]
    return Written(number, values, texts)


def _write(draw: st.DrawFn, number: NumberFormat, value: Decimal) -> str:
    """The value as a bank writes it in this format (an independent model)."""
    whole, _, fraction = format(abs(value), "f").partition(".")
    if number.thousands_separator and draw(st.booleans()):
        groups = f"{int(whole):,}".split(",")
        separator = number.thousands_separator
        if separator in SPACES:
            separator = draw(st.sampled_from(SPACES))
        whole = separator.join(groups)
    body = whole + (number.decimal_separator + fraction if fraction else "")
    if value >= 0:
        if "dr_cr" in number.negative and draw(st.booleans()):
            return body + draw(st.sampled_from([" CR", "CR", " cr"]))
        return body
    form = draw(st.sampled_from(number.negative))
    return {
        "minus": f"-{body}",
        "trailing_minus": f"{body}-",
        "parentheses": f"({body})",
        "dr_cr": body + draw(st.sampled_from([" DR", "DR", " Dr"])),
    }[form]


@given(written())
def test_the_conversion_gives_the_clean_twins_text(case: Written) -> None:
    converted = converter_of(ColumnFormat(number=case.number)).convert(case.texts)
    assert [Decimal(v) for v in converted] == case.values


@settings(
    max_examples=15,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=written())
def test_a_formatted_file_loads_the_values_of_its_clean_twin(
    runtime: Runtime, tenant: Tenant, case: Written
) -> None:
    delimiter = (
        ";"
        if case.number.decimal_separator == "," or "," in case.number.thousands_separator
        else ","
    )
    formatted = (
        "id"
        + delimiter
        + "amount\n"
        + "".join(f'{i}{delimiter}"{text}"\n' for i, text in enumerate(case.texts))
    )
    clean = "id,amount\n" + "".join(f"{i},{format(v, 'f')}\n" for i, v in enumerate(case.values))
    loaded = []
    for content, column in (
        (formatted, case.declared("amount")),
        (clean, {"name": "amount", "type": "decimal", "scale": 6}),
    ):
        path = write_file(content)
        try:
            result = runtime.catalogue.create_source_from_file(
                workspace_id=tenant.workspace_id,
                name=f"twin {next(_names)}",
                path=path,
                declared={"columns": [{"name": "id", "type": "integer"}, column]},
            )
        finally:
            path.unlink()
        rows = read_data(runtime, tenant, result.resource.id, page_size=1000, ordering="id")
        loaded.append([row["amount"] for row in rows])
    assert loaded[0] == loaded[1]
    assert [Decimal(str(v)) for v in loaded[0]] == case.values


# --- the whole of a bank's file: a preamble, dates, the amounts, a totals line -------------

DATE_WRITERS: dict[str, Callable[[dt.date], str]] = {  # an independent model of each format
    "DD.MM.YYYY": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year:04d}",
    "DD/MM/YYYY": lambda d: f"{d.day:02d}/{d.month:02d}/{d.year:04d}",
    "MM/DD/YYYY": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year:04d}",
    "D/M/YYYY": lambda d: f"{d.day}/{d.month}/{d.year:04d}",
    "YYYYMMDD": lambda d: f"{d.year:04d}{d.month:02d}{d.day:02d}",
}
# A preamble line holds anything but a line break (and NUL, which fails any file): the
# account, the period, quotes, delimiters, characters str.splitlines would split at.
preamble_lines = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\x00"), max_size=40
)


@dataclass(frozen=True)
class Statement:
    """A bank statement as the bank writes it: lines above the header, a booking date
    and an amount per row, a totals record below."""

    amounts: Written
    date_format: str
    dates: list[dt.date]
    preamble: list[str]
    totals: int

    def layout(self) -> dict[str, Any]:
        return {
            "columns": [
                {"name": "id", "type": "integer"},
                {"name": "booked", "type": "date", "format": self.date_format},
                self.amounts.declared("amount"),
            ],
            "skip_leading_lines": len(self.preamble),
            "skip_trailing_lines": self.totals,
        }

    def formatted(self) -> str:
        write = DATE_WRITERS[self.date_format]
        rows = zip(self.dates, self.amounts.texts, strict=True)
        body = "".join(f'{i};{write(d)};"{text}"\n' for i, (d, text) in enumerate(rows))
        total = f'Total;;"{self.amounts.texts[0]}"\n'  # a record like the rows, not a row
        return (
            "".join(f"{line}\n" for line in self.preamble)
            + "id;booked;amount\n"
            + body
            + (total * self.totals)
        )

    def clean(self) -> str:
        rows = zip(self.dates, self.amounts.values, strict=True)
        return "id,booked,amount\n" + "".join(
            f"{i},{d.isoformat()},{format(v, 'f')}\n" for i, (d, v) in enumerate(rows)
        )


@st.composite
def statements(draw: st.DrawFn) -> Statement:
    amounts = draw(written())
    dates = draw(
        st.lists(
            st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)),
            min_size=len(amounts.values),
            max_size=len(amounts.values),
        )
    )
    return Statement(
        amounts,
        draw(st.sampled_from(sorted(DATE_WRITERS))),
        dates,
        draw(st.lists(preamble_lines, max_size=4)),
        draw(st.integers(0, 2)),
    )


@settings(
    max_examples=15,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=statements())
def test_a_bank_statement_loads_the_values_of_its_clean_twin(
    runtime: Runtime, tenant: Tenant, case: Statement
) -> None:
    clean_layout = {
        "columns": [
            {"name": "id", "type": "integer"},
            {"name": "booked", "type": "date"},
            {"name": "amount", "type": "decimal", "scale": 6},
        ]
    }
    loaded = []
    for content, layout in ((case.formatted(), case.layout()), (case.clean(), clean_layout)):
        path = write_file(content)
        try:
            result = runtime.catalogue.create_source_from_file(
                workspace_id=tenant.workspace_id,
                name=f"statement {next(_names)}",
                path=path,
                declared=layout,
            )
        finally:
            path.unlink()
        rows = read_data(runtime, tenant, result.resource.id, page_size=1000, ordering="id")
        loaded.append([(row["booked"], row["amount"]) for row in rows])
    assert loaded[0] == loaded[1]
    assert [(d, Decimal(str(v))) for d, v in loaded[0]] == [
        (d.isoformat(), v) for d, v in zip(case.dates, case.amounts.values, strict=True)
    ]
