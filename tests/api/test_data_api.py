"""GET /api/v1/resources/{id}/data: envelope, paging, fields, ordering, text escaping.

Filters are in test_data_api_filters.py, errors in test_data_api_errors.py. Every test
runs on SQLite and PostgreSQL through a real uvicorn server.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest

from support.data_api import Params, get_data, ok_body
from support.factories import LEDGER_COLUMNS, Tenant, make_source
from tally.runtime import Runtime
from tally.storage.resources import Resource

# Shuffled labels, so that "insertion order" can never be confused with "sorted by n".
SHUFFLED = [17, 3, 22, 9, 1, 14, 6, 20, 11, 2, 19, 8, 15, 4, 21, 12, 7, 18, 5, 13, 10, 16, 23]


def numbered_csv(values: list[int], column: str = "n") -> str:
    return column + "\n" + "".join(f"{v}\n" for v in values)


def labels(response: httpx.Response, key: str = "id") -> list[Any]:
    return [row[key] for row in ok_body(response)["data"]]


# --- envelope ------------------------------------------------------------------------------


def test_envelope_has_exactly_data_and_meta(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    body = ok_body(get_data(api, tenant, ledger.id))
    assert list(body) == ["data", "meta"]
    assert body["meta"] == {
        "page": 1,
        "page_size": 1000,
        "returned_count": 6,
        "total_count": 6,
        "total_pages": 1,
    }
    assert body["data"][0] == {
        "id": 1,
        "amount": Decimal("10.00"),
        "txn_date": "2024-01-05",
        "posted_at": "2024-01-05T10:00:00Z",
        "flag": True,
        "memo": "alpha",
        "bank.amount": 1,
        "Amount": 100,
    }
    assert body["data"][3]["posted_at"] is None
    assert body["data"][3]["flag"] is None
    assert body["data"][2]["txn_date"] is None
    assert body["data"][2]["memo"] is None
    assert [list(row) for row in body["data"]] == [LEDGER_COLUMNS] * 6


def test_decimals_keep_exact_digits(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, "amount\n12345678901234567.89\n-0.05\n10.50\n")
    response = get_data(api, tenant, source.id)
    assert labels(response, "amount") == [
        Decimal("12345678901234567.89"),
        Decimal("-0.05"),
        Decimal("10.50"),
    ]
    assert b"12345678901234567.89" in response.content
    assert b"10.50" in response.content


def test_nothing_matching_gives_empty_data(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    body = ok_body(get_data(api, tenant, ledger.id, [("id", "999")]))
    assert body == {
        "data": [],
        "meta": {
            "page": 1,
            "page_size": 1000,
            "returned_count": 0,
            "total_count": 0,
            "total_pages": 0,
        },
    }


def test_page_beyond_the_end_is_empty_with_the_true_total(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    body = ok_body(get_data(api, tenant, ledger.id, [("page", "5"), ("page_size", "4")]))
    assert body == {
        "data": [],
        "meta": {
            "page": 5,
            "page_size": 4,
            "returned_count": 0,
            "total_count": 6,
            "total_pages": 2,
        },
    }
    huge = "9" * 30  # an offset far beyond any 64-bit integer
    body = ok_body(get_data(api, tenant, ledger.id, [("page", huge), ("page_size", "10000")]))
    assert body["data"] == []
    assert body["meta"]["page"] == int(huge)
    assert body["meta"]["total_count"] == 6


def test_total_pages_is_rounded_up(api: httpx.Client, tenant: Tenant, ledger: Resource) -> None:
    found = {}
    for page_size in (1, 4, 5, 6, 7, 10000):
        meta = ok_body(get_data(api, tenant, ledger.id, [("page_size", str(page_size))]))["meta"]
        found[page_size] = (meta["total_pages"], meta["returned_count"])
    assert found == {1: (6, 1), 4: (2, 4), 5: (2, 5), 6: (1, 6), 7: (1, 6), 10000: (1, 6)}


def test_total_count_counts_filtered_rows_across_pages(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    params = [("flag", "true"), ("page_size", "2"), ("page", "2")]
    body = ok_body(get_data(api, tenant, ledger.id, params))
    assert [row["id"] for row in body["data"]] == [6]
    assert body["meta"] == {
        "page": 2,
        "page_size": 2,
        "returned_count": 1,
        "total_count": 3,
        "total_pages": 2,
    }


# --- paging --------------------------------------------------------------------------------


def test_page_n_skips_n_minus_one_pages(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    pages = {
        (page, size): labels(
            get_data(api, tenant, ledger.id, [("page", str(page)), ("page_size", str(size))])
        )
        for page, size in [(1, 2), (2, 2), (3, 2), (2, 4), (2, 5), (6, 1), (7, 1)]
    }
    assert pages == {
        (1, 2): [1, 2],
        (2, 2): [3, 4],
        (3, 2): [5, 6],
        (2, 4): [5, 6],
        (2, 5): [6],
        (6, 1): [6],
        (7, 1): [],
    }


def test_default_page_size_is_1000(api: httpx.Client, runtime: Runtime, tenant: Tenant) -> None:
    source = make_source(runtime.engine, tenant, numbered_csv(list(range(1, 1002))))
    first = ok_body(get_data(api, tenant, source.id))
    assert first["meta"] == {
        "page": 1,
        "page_size": 1000,
        "returned_count": 1000,
        "total_count": 1001,
        "total_pages": 2,
    }
    assert [row["n"] for row in first["data"]] == list(range(1, 1001))
    assert labels(get_data(api, tenant, source.id, [("page", "2")]), "n") == [1001]


def test_page_size_above_10000_is_capped_silently(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, numbered_csv(list(range(1, 10006))))
    for page_size in ("10001", "50000", "9223372036854775807"):
        first = ok_body(get_data(api, tenant, source.id, [("page_size", page_size)]))
        assert first["meta"] == {
            "page": 1,
            "page_size": 10000,
            "returned_count": 10000,
            "total_count": 10005,
            "total_pages": 2,
        }, page_size
        assert first["data"][-1] == {"n": 10000}
        # The offset of page 2 uses the capped size too.
        second = get_data(api, tenant, source.id, [("page", "2"), ("page_size", page_size)])
        assert labels(second, "n") == [10001, 10002, 10003, 10004, 10005]


def test_unordered_paging_returns_every_row_once_in_insertion_order(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, numbered_csv(SHUFFLED))
    seen: list[int] = []
    page = 1
    while True:
        body = ok_body(get_data(api, tenant, source.id, [("page", str(page)), ("page_size", "5")]))
        seen += [row["n"] for row in body["data"]]
        if body["meta"]["returned_count"] < body["meta"]["page_size"]:
            break
        page += 1
    assert page == 5
    assert seen == SHUFFLED


def test_without_ordering_rows_come_in_insertion_order(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, numbered_csv(SHUFFLED))
    assert labels(get_data(api, tenant, source.id), "n") == SHUFFLED
    assert labels(get_data(api, tenant, source.id, [("n__gte", "15")]), "n") == [
        v for v in SHUFFLED if v >= 15
    ]


# --- fields --------------------------------------------------------------------------------


def test_fields_selects_columns_in_the_requested_order(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    body = ok_body(get_data(api, tenant, ledger.id, [("fields", "memo,Amount,id")]))
    assert [list(row) for row in body["data"]] == [["memo", "Amount", "id"]] * 6
    assert body["data"][0] == {"memo": "alpha", "Amount": 100, "id": 1}


def test_fields_accept_dotted_and_case_sensitive_names(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    body = ok_body(get_data(api, tenant, ledger.id, [("fields", "bank.amount,amount")]))
    assert body["data"][1] == {"bank.amount": 2, "amount": Decimal("10.01")}
    body = ok_body(get_data(api, tenant, ledger.id, [("fields", "Amount")]))
    assert body["data"][1] == {"Amount": 200}


def test_fields_combine_with_filters_and_ordering_on_other_columns(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    params = [("fields", "memo"), ("flag", "true"), ("ordering", "-amount")]
    body = ok_body(get_data(api, tenant, ledger.id, params))
    assert body["data"] == [{"memo": "alpha"}, {"memo": "alpha"}, {"memo": None}]
    assert body["meta"]["total_count"] == 3


# --- ordering ------------------------------------------------------------------------------


ORDERINGS = {
    # missing first ascending, last descending; ties in insertion order ascending,
    # reverse insertion order descending.
    "amount": [5, 3, 1, 4, 2, 6],
    "-amount": [6, 2, 4, 1, 3, 5],
    "id": [1, 2, 3, 4, 5, 6],
    "-id": [6, 5, 4, 3, 2, 1],
    "txn_date": [3, 1, 2, 4, 5, 6],
    "-txn_date": [6, 5, 4, 2, 1, 3],
    "posted_at": [4, 1, 2, 3, 5, 6],
    "-posted_at": [6, 5, 3, 2, 1, 4],
    "flag": [4, 2, 5, 1, 3, 6],
    "-flag": [6, 3, 1, 5, 2, 4],
    "memo": [3, 1, 6, 2, 5, 4],
    "-memo": [4, 5, 2, 6, 1, 3],
    "-bank.amount": [6, 5, 4, 3, 2, 1],
    "-Amount": [6, 5, 4, 3, 2, 1],
}


def test_ordering_sorts_with_ties_and_missing_values_placed(
    api: httpx.Client, tenant: Tenant, ledger: Resource
) -> None:
    found = {
        key: labels(get_data(api, tenant, ledger.id, [("ordering", key)])) for key in ORDERINGS
    }
    assert found == ORDERINGS


def test_ordering_ties_break_on_insertion_order_not_on_values(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    csv = "group,n\n" + "".join(f"{'ab'[v % 2]},{v}\n" for v in SHUFFLED)
    source = make_source(runtime.engine, tenant, csv)
    a_rows = [v for v in SHUFFLED if v % 2 == 0]
    b_rows = [v for v in SHUFFLED if v % 2 == 1]
    assert labels(get_data(api, tenant, source.id, [("ordering", "group")]), "n") == a_rows + b_rows
    descending = get_data(api, tenant, source.id, [("ordering", "-group")])
    assert labels(descending, "n") == b_rows[::-1] + a_rows[::-1]


def test_ordered_paging_is_consistent_across_pages(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    csv = "group,n\n" + "".join(f"{v % 3},{v}\n" for v in SHUFFLED)
    source = make_source(runtime.engine, tenant, csv)
    whole = labels(get_data(api, tenant, source.id, [("ordering", "-group")]), "n")
    paged: list[int] = []
    for page in range(1, 6):
        params = [("ordering", "-group"), ("page", str(page)), ("page_size", "5")]
        paged += labels(get_data(api, tenant, source.id, params), "n")
    assert paged == whole
    assert sorted(paged) == sorted(SHUFFLED)


# --- text, unicode and JSON escaping -------------------------------------------------------

TRICKY_CSV = (
    'id,"say ""hi""",back\\slash,💰 total,memo\n'
    '1,"she said ""no""",C:\\temp\\x,1.50,"line one\nline two"\n'
    "2,emoji 😀 here,tab\there,2.25,naïve café\n"
    '3,</script>,"{""a"": 1}",-0.10,\u2028sep\n'
)


def test_text_and_names_with_quotes_backslashes_newlines_and_emoji_round_trip(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, TRICKY_CSV)
    body = ok_body(get_data(api, tenant, source.id))
    assert body["data"] == [
        {
            "id": 1,
            'say "hi"': 'she said "no"',
            "back\\slash": "C:\\temp\\x",
            "💰 total": Decimal("1.50"),
            "memo": "line one\nline two",
        },
        {
            "id": 2,
            'say "hi"': "emoji 😀 here",
            "back\\slash": "tab\there",
            "💰 total": Decimal("2.25"),
            "memo": "naïve café",
        },
        {
            "id": 3,
            'say "hi"': "</script>",
            "back\\slash": '{"a": 1}',
            "💰 total": Decimal("-0.10"),
            "memo": "\u2028sep",
        },
    ]
    assert response_is_utf8_json(get_data(api, tenant, source.id))


def response_is_utf8_json(response: httpx.Response) -> bool:
    assert response.headers["content-type"].startswith("application/json")
    json.loads(response.content.decode("utf-8"))
    return True


TRICKY_QUERIES: list[tuple[Params, list[int]]] = [
    ([('say "hi"', 'she said "no"')], [1]),
    ([("memo", "line one\nline two")], [1]),
    ([("back\\slash", "C:\\temp\\x")], [1]),
    ([('say "hi"', "emoji 😀 here")], [2]),
    ([("memo__in", "naïve café,\u2028sep")], [2, 3]),
    ([("💰 total__gt", "0")], [1, 2]),
    ([("fields", 'id,💰 total,say "hi"'), ("ordering", "-💰 total")], [2, 1, 3]),
]


def test_unicode_and_escaped_names_and_values_filter_and_order(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    source = make_source(runtime.engine, tenant, TRICKY_CSV)
    for params, expected in TRICKY_QUERIES:
        assert labels(get_data(api, tenant, source.id, params)) == expected, params


# 63 bytes is PostgreSQL's identifier limit: rows are rendered with names as labels up to
# it, and another way beyond it. Both must give every name back exactly.
EDGE_NAMES = ["x" * 63, "é" * 32, "y" * 200, "Amount", "select", "50% off", 'a"b', "a.b"]


def test_column_names_at_and_beyond_identifier_limits_come_back_exactly(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    header = ",".join('"' + name.replace('"', '""') + '"' for name in ["id", *EDGE_NAMES])
    values = ",".join(["7", *(str(n) for n in range(len(EDGE_NAMES)))])
    source = make_source(runtime.engine, tenant, f"{header}\n{values}\n")
    expected = {"id": 7, **{name: n for n, name in enumerate(EDGE_NAMES)}}
    assert ok_body(get_data(api, tenant, source.id))["data"] == [expected]
    short = [name for name in EDGE_NAMES if len(name.encode()) <= 63]
    chosen = ok_body(get_data(api, tenant, source.id, [("fields", ",".join(["id", *short]))]))
    assert chosen["data"] == [{"id": 7, **{name: expected[name] for name in short}}]


def test_wide_resources_render_every_column(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    names = [f"col {n}" for n in range(120)]  # beyond one json_build_object call
    header = ",".join(names)
    source = make_source(runtime.engine, tenant, f"{header}\n" + ",".join(map(str, range(120))))
    assert ok_body(get_data(api, tenant, source.id))["data"] == [
        {name: n for n, name in enumerate(names)}
    ]


# Page statements are built once per query shape and reused with new values: a value
# baked into a reused statement would answer the first request's rows again.
SAME_SHAPE_PAIRS: list[tuple[Params, Params]] = [
    ([("n__gt", "3")], [("n__gt", "6")]),
    ([("n__in", "1,2")], [("n__in", "5,7,9")]),
    ([("n", "4")], [("n", "8")]),
    (
        [("ordering", "-n"), ("page", "2"), ("page_size", "3")],
        [("ordering", "-n"), ("page", "3"), ("page_size", "3")],
    ),
    (
        [("n__lte", "5"), ("page_size", "2"), ("page", "2")],
        [("n__lte", "9"), ("page_size", "2"), ("page", "4")],
    ),
]


@pytest.mark.parametrize(("first", "second"), SAME_SHAPE_PAIRS)
def test_requests_of_one_shape_answer_with_their_own_values(
    api: httpx.Client, runtime: Runtime, tenant: Tenant, first: Params, second: Params
) -> None:
    source = make_source(runtime.engine, tenant, numbered_csv(list(range(1, 11))))
    rows = list(range(1, 11))

    def expected(params: Params) -> list[int]:
        chosen = rows
        size, page = 1000, 1
        for key, value in params:
            if key == "n__gt":
                chosen = [n for n in chosen if n > int(value)]
            elif key == "n__lte":
                chosen = [n for n in chosen if n <= int(value)]
            elif key == "n__in":
                chosen = [n for n in chosen if str(n) in value.split(",")]
            elif key == "n":
                chosen = [n for n in chosen if n == int(value)]
            elif key == "ordering":
                chosen = sorted(chosen, reverse=value.startswith("-"))
            elif key == "page_size":
                size = int(value)
            elif key == "page":
                page = int(value)
        return chosen[(page - 1) * size : page * size]

    for params in (first, second, first, second):
        assert labels(get_data(api, tenant, source.id, params), "n") == expected(params), params
