"""Data API filters: the seven forms on every column type, AND, names, empty values, 400s.

Every test runs on SQLite and PostgreSQL through a real uvicorn server.
"""

from __future__ import annotations

import httpx
import pytest

from support.data_api import Params, get_data, ok_body
from support.factories import Tenant, make_source
from tally.runtime import Runtime
from tally.storage.resources import Resource

NOT_APPLICABLE = {"detail": "The requested filters or ordering could not be applied."}


def ids(response: httpx.Response) -> list[int] | str:
    """The `id` of each row (checking total_count), or the status and body of a failure."""
    if response.status_code != 200:
        return f"{response.status_code} {response.text}"
    body = ok_body(response)
    assert body["meta"]["total_count"] == len(body["data"])
    return [row["id"] for row in body["data"]]


SEVEN_FORMS: dict[str, list[tuple[str, str, list[int]]]] = {
    "integer": [
        ("id", "3", [3]),
        ("id__exact", "3", [3]),
        ("id__gt", "4", [5, 6]),
        ("id__gte", "4", [4, 5, 6]),
        ("id__lt", "2", [1]),
        ("id__lte", "2", [1, 2]),
        ("id__in", "1,3,9", [1, 3]),
        ("id", "-0", []),
        ("id__gte", "+5", [5, 6]),
    ],
    # decimal (scale 2), compared exactly
    "decimal": [
        ("amount", "10.00", [1, 4]),
        ("amount", "10", [1, 4]),
        ("amount__exact", "10.0", [1, 4]),
        ("amount", "10.001", []),
        ("amount__gt", "10.005", [2, 6]),
        ("amount__gt", "10.00", [2, 6]),
        ("amount__gte", "10.005", [2, 6]),
        ("amount__gte", "10.01", [2, 6]),
        ("amount__lt", "10.005", [1, 3, 4]),
        ("amount__lt", "0", [3]),
        ("amount__lte", "10.009", [1, 3, 4]),
        ("amount__lte", "-5.5", [3]),
        ("amount__in", "10.01,-5.5,10.005", [2, 3]),
        ("amount__gt", "99999999999999999999999", []),
        ("amount__lt", "99999999999999999999999", [1, 2, 3, 4, 6]),
    ],
    "date": [
        ("txn_date", "2024-01-06", [2]),
        ("txn_date__exact", "2024-01-06", [2]),
        ("txn_date__gt", "2024-02-01", [5, 6]),
        ("txn_date__gte", "2024-02-01", [4, 5, 6]),
        ("txn_date__lt", "2024-01-06", [1]),
        ("txn_date__lte", "2024-01-06", [1, 2]),
        ("txn_date__in", "2024-01-05,2024-03-01", [1, 6]),
    ],
    # timestamp with offset (stored in UTC, rendered with Z)
    "timestamp": [
        ("posted_at", "2024-01-05T10:00:00Z", [1]),
        ("posted_at__exact", "2024-01-05T11:00:00+01:00", [1]),
        ("posted_at__gt", "2024-01-07T09:00:00Z", [5, 6]),
        ("posted_at__gte", "2024-01-07T09:00:00Z", [3, 5, 6]),
        ("posted_at__lt", "2024-01-06T11:30:00Z", [1]),
        ("posted_at__lte", "2024-01-06T11:30:00Z", [1, 2]),
        ("posted_at__in", "2024-01-05T10:00:00Z,2024-03-01T00:00:00Z", [1, 6]),
    ],
    "boolean": [
        ("flag", "true", [1, 3, 6]),
        ("flag", "false", [2, 5]),
        ("flag__exact", "FALSE", [2, 5]),
        ("flag__gt", "false", [1, 3, 6]),
        ("flag__gte", "false", [1, 2, 3, 5, 6]),
        ("flag__lt", "true", [2, 5]),
        ("flag__lte", "true", [1, 2, 3, 5, 6]),
        ("flag__in", "true,false", [1, 2, 3, 5, 6]),
    ],
    # text, byte order, case-sensitive
    "text": [
        ("memo", "alpha", [1, 6]),
        ("memo", "Alpha", []),
        ("memo__exact", "beta", [2]),
        ("memo__gt", "beta", [4, 5]),
        ("memo__gte", "beta", [2, 4, 5]),
        ("memo__lt", "beta", [1, 6]),
        ("memo__lte", "beta", [1, 2, 6]),
        ("memo__in", "alpha,gamma,zeta", [1, 4, 6]),
    ],
}


def check(
    api: httpx.Client, tenant: Tenant, resource_id: int, cases: list[tuple[Params, list[int]]]
) -> None:
    """Run every case against one resource; report every mismatch at once."""
    found = {str(params): ids(get_data(api, tenant, resource_id, params)) for params, _ in cases}
    assert found == {str(params): expected for params, expected in cases}


@pytest.mark.parametrize("column_type", list(SEVEN_FORMS))
def test_filter_forms_on_every_column_type(
    api: httpx.Client, tenant: Tenant, ledger: Resource, column_type: str
) -> None:
    cases = [([(name, value)], expected) for name, value, expected in SEVEN_FORMS[column_type]]
    check(api, tenant, ledger.id, cases)


EMPTY_VALUES: list[tuple[Params, list[int]]] = [
    ([("amount", "")], [5]),
    ([("amount__exact", "")], [5]),
    ([("txn_date", "")], [3]),
    ([("posted_at", "")], [4]),
    ([("flag", "")], [4]),
    ([("memo", "")], [3]),
    ([("id", "")], []),
    ([("memo__in", "alpha,")], [1, 3, 6]),
    ([("flag__in", ",false")], [2, 4, 5]),
]


def test_empty_value_matches_missing_values(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    check(api, tenant, ledger.id, EMPTY_VALUES)


CONJUNCTIONS: list[tuple[Params, list[int]]] = [
    ([("amount__gte", "10"), ("flag", "true")], [1, 6]),
    ([("id__gt", "1"), ("id__lt", "5"), ("memo__in", "beta,gamma,alpha")], [2, 4]),
    ([("amount__gte", "0"), ("amount__gte", "10.01")], [2, 6]),
    ([("memo", "alpha"), ("memo", "beta")], []),
    ([("id__lt", "4"), ("id__lt", "2")], [1]),
    ([("txn_date__gte", "2024-01-06"), ("posted_at__lt", "2024-02-16")], [2, 5]),
]


def test_several_filters_combine_with_and(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    check(api, tenant, ledger.id, CONJUNCTIONS)


def test_filter_order_in_the_url_does_not_matter(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    params = [("id__gt", "1"), ("amount__gte", "10"), ("flag", "false"), ("page_size", "5")]
    first = get_data(api, tenant, ledger.id, params)
    second = get_data(api, tenant, ledger.id, params[::-1])
    assert ids(first) == [2]
    assert second.content == first.content


NAMES: list[tuple[Params, list[int]]] = [
    ([("bank.amount", "2")], [2]),
    ([("bank.amount__gte", "5")], [5, 6]),
    ([("bank.amount__in", "1,6")], [1, 6]),
    ([("Amount", "100")], [1]),
    ([("Amount__gte", "500")], [5, 6]),
    ([("amount", "100")], []),
    ([("amount__gt", "20")], [6]),
]


def test_dotted_and_case_sensitive_column_names(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    check(api, tenant, ledger.id, NAMES)


def test_filter_names_differing_only_in_case_are_unknown(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    response = get_data(api, tenant, ledger.id, [("AMOUNT", "1")])
    assert response.status_code == 400
    assert response.json() == {
        "detail": "Filter field 'AMOUNT' is not a valid column for this resource."
    }


MISFITS = [
    ("amount", "abc"),
    ("amount__gt", "1e5"),
    ("amount__in", "1,x"),
    ("amount__gte", ""),
    ("id", "1.5"),
    ("id__lt", "ten"),
    ("id", "99999999999999999999"),
    ("id__in", "1,2.5"),
    ("Amount", "1.5"),
    ("bank.amount__gt", "abc"),
    ("txn_date", "2024-13-01"),
    ("txn_date__gte", "2024-02-30"),
    ("txn_date", "05/01/2024"),
    ("posted_at", "yesterday"),
    ("posted_at__lt", "2024-01-05T25:00:00Z"),
    ("flag", "maybe"),
    ("flag__in", "true,perhaps"),
    ("memo__gt", ""),
]


def test_value_not_fitting_the_column_type_is_400(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    found = {
        (name, value): (response.status_code, response.json())
        for name, value in MISFITS
        for response in [get_data(api, tenant, ledger.id, [(name, value)])]
    }
    assert found == {case: (400, NOT_APPLICABLE) for case in MISFITS}


def test_naive_timestamp_column_rejects_a_value_with_an_offset(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, "id,at\n1,2024-01-05 10:00:00\n2,\n")
    assert ids(get_data(api, tenant, source.id, [("at", "2024-01-05T10:00:00")])) == [1]
    assert ids(get_data(api, tenant, source.id, [("at__lt", "2024-01-06")])) == [1]
    response = get_data(api, tenant, source.id, [("at", "2024-01-05T10:00:00Z")])
    assert response.status_code == 400
    assert response.json() == NOT_APPLICABLE
