"""A formatted decimal column loads to exactly the values of its clean twin (issue #32,
point 1): whatever the separators and negative forms a source declares, the numbers a
file writes in them are stored as the same exact values as the file written plainly
(`-1234.56`), on both backends; and the conversion alone, on many more examples."""

from __future__ import annotations

import itertools
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
