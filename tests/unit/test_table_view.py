"""The resource table's URL state (console/table_view.py): the Data API's grammar both
ways, the links each control leads to, and a page that is not a number refused."""

from __future__ import annotations

import pytest

from tally.console.resource_table import content_disposition, file_name
from tally.console.table_view import OPERATOR_CHOICES, BadViewError, TableView
from tally.core.filters import OPERATORS


def test_the_form_offers_exactly_the_data_apis_seven_forms() -> None:
    assert [suffix for suffix, _ in OPERATOR_CHOICES] == ["", *OPERATORS]
    assert len(OPERATOR_CHOICES) == 7


def test_a_query_string_reads_and_writes_back_the_same() -> None:
    items = [("amount__gt", "10"), ("memo", ""), ("ordering", "-amount"), ("fields", "a,b"),
             ("page", "2"), ("page_size", "25")]  # fmt: skip
    view = TableView.of(items)
    assert view.filters == (("amount__gt", "10"), ("memo", ""))
    assert view.query() == "amount__gt=10&memo=&fields=a%2Cb&ordering=-amount&page=2&page_size=25"
    assert view.data_api_query().endswith("&page=2&page_size=25")
    assert TableView.of([]).data_api_query() == "page=1&page_size=50"


def test_each_control_leads_back_to_page_one() -> None:
    view = TableView.of([("memo", "a"), ("id__in", "1,2"), ("ordering", "id"), ("page", "3")])
    assert view.sorted_by("id") == "memo=a&id__in=1%2C2&ordering=-id"
    assert view.sorted_by("memo") == "memo=a&id__in=1%2C2&ordering=memo"
    assert view.without(0) == "id__in=1%2C2&ordering=id"
    assert view.with_filter("amount", "lte", "5") == "memo=a&id__in=1%2C2&amount__lte=5&ordering=id"
    assert view.at_page(4).endswith("&page=4")
    assert view.with_fields(["a", "b"], ["a", "b"]) == "memo=a&id__in=1%2C2&ordering=id"
    assert view.with_fields([], ["a", "b"]) == "memo=a&id__in=1%2C2&ordering=id"
    assert view.with_fields(["b"], ["a", "b"]).endswith("&fields=b&ordering=id")


def test_a_page_size_is_capped_and_a_bad_one_refused() -> None:
    assert TableView.of([("page_size", "10000")]).page_size == 500
    for bad in ("0", "-1", "two", "1.5", "\u0661"):
        with pytest.raises(BadViewError):
            TableView.of([("page", bad)])


def test_filters_are_shown_as_column_operator_value() -> None:
    view = TableView.of([("a__b", "1"), ("amount__gte", "2"), ("x__like", "3"), ("z", "")])
    shown = [(f.column, f.operator, f.value) for f in view.shown_filters(["a__b", "amount", "z"])]
    assert shown == [
        ("a__b", "=", "1"),
        ("amount", "≥", "2"),
        ("x__like", "=", "3"),
        ("z", "=", ""),
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [("Bank (EUR) 2026", "Bank _EUR_ 2026"), ('a"; b\\c/d', "a_ b_c_d"), ("...", "export"),
     ("Überweisungen", "_berweisungen")],
)  # fmt: skip
def test_a_file_name_keeps_only_safe_characters(name: str, expected: str) -> None:
    assert file_name(name) == expected


def test_an_attachment_also_carries_the_name_itself() -> None:
    assert content_disposition("Überweisungen (EUR)") == (
        'attachment; filename="_berweisungen _EUR_.csv"; '
        "filename*=UTF-8''%C3%9Cberweisungen%20%28EUR%29.csv"
    )
    assert content_disposition("a/b\\c").endswith("filename*=UTF-8''a_b_c.csv")
