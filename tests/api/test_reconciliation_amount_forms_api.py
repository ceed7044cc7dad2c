"""A side's amount as credit and debit columns, and its currency column (issue #32, points 3
and 4), over real HTTP on both backends: each fault a 400 or a 422 naming its field, the
canonical definition GET shows, the OpenAPI schema, and a manual match across currencies
refused with a 409 naming each row."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from support.factories import Tenant, make_source
from support.v2_api import problems
from tally.runtime import Runtime

BASE = "/api/v2/reconciliations"
BANK = (
    "Reference,Debit,Credit,Currency,Booked,Fee\n"
    "INV-1,,100.00,EUR,2026-10-01,1\n"
    "INV-2,30.00,,usd,2026-10-02,0\n"
)
LEDGER = (
    "reference,amount,currency,posted\nINV-1,100.00,EUR,2026-10-01\nINV-2,-30.00,EUR,2026-10-02\n"
)


@pytest.fixture
def sources(runtime: Runtime, tenant: Tenant) -> tuple[int, int]:
    bank = make_source(runtime.engine, tenant, BANK, name="bank").id
    ledger = make_source(runtime.engine, tenant, LEDGER, name="ledger").id
    return bank, ledger


def body(sources: tuple[int, int]) -> dict[str, Any]:
    bank, ledger = sources
    return {
        "name": "Bank vs ledger",
        "left": {
            "name": "bank",
            "resource_id": bank,
            "amount": {"credit": "Credit", "debit": "Debit"},
            "date": "Booked",
            "currency": "Currency",
        },
        "right": {
            "name": "ledger",
            "resource_id": ledger,
            "amount": "amount",
            "date": "posted",
            "currency": "currency",
        },
        "passes": [
            {
                "name": "reference",
                "type": "one_to_one",
                "keys": [{"left": "Reference", "right": "reference"}],
            }
        ],
    }


def post(api: httpx.Client, tenant: Tenant, payload: Any) -> httpx.Response:
    return api.post(BASE, json=payload, headers=tenant.v2_headers)


def test_get_shows_both_amount_forms_and_the_currencies_as_given(
    api: httpx.Client, tenant: Tenant, sources: tuple[int, int]
) -> None:
    created = post(api, tenant, body(sources))
    assert created.status_code == 201, created.text
    shown = api.get(f"{BASE}/{created.json()['id']}", headers=tenant.v2_headers).json()
    assert shown["definition"]["left"] == {
        "name": "bank",
        "resource_id": sources[0],
        "amount": {"credit": "Credit", "debit": "Debit"},
        "date": "Booked",
        "currency": "Currency",
    }
    assert shown["definition"]["right"]["amount"] == "amount"
    assert shown["definition"]["right"]["currency"] == "currency"


def _side(which: str, **changes: Any) -> Any:
    """A change of one side's fields (None: the field left out)."""

    def change(payload: dict[str, Any]) -> None:
        for key, value in changes.items():
            if value is None:
                payload[which].pop(key, None)
            else:
                payload[which][key] = value

    return change


def _left(**changes: Any) -> Any:
    return _side("left", **changes)


def _right(**changes: Any) -> Any:
    return _side("right", **changes)


def _both(**changes: Any) -> Any:
    def change(payload: dict[str, Any]) -> None:
        _left(**changes)(payload)
        _right(**changes)(payload)

    return change


FAULTS = {
    "unknown credit column": (
        _left(amount={"credit": "Credits", "debit": "Debit"}),
        [
            (
                "left.amount.credit",
                "resource {bank} has no column 'Credits' (its columns: 'Reference', 'Debit', "
                "'Credit', 'Currency', 'Booked', 'Fee')",
            )
        ],
    ),
    "text debit column": (
        _left(amount={"credit": "Credit", "debit": "Reference"}),
        [
            (
                "left.amount.debit",
                "column 'Reference' is text: a debit column must be decimal or integer",
            )
        ],
    ),
    "the same column twice": (
        _left(amount={"credit": "Credit", "debit": "Credit"}),
        [
            (
                "left.amount.debit",
                "column 'Credit' is left.amount.credit too: credit and debit are two columns "
                "(name one signed column as the amount instead)",
            )
        ],
    ),
    "text amount": (
        _right(amount="currency"),
        [
            (
                "right.amount",
                "column 'currency' is text: an amount column must be decimal or integer",
            )
        ],
    ),
    "unknown currency column": (
        _right(currency="ccy"),
        [
            (
                "right.currency",
                "resource {ledger} has no column 'ccy' (its columns: 'reference', 'amount', "
                "'currency', 'posted')",
            )
        ],
    ),
    "decimal currency column": (
        _left(currency="Fee"),
        [("left.currency", "column 'Fee' is integer: a currency column must be text")],
    ),
    "currency on one side": (
        _right(currency=None),
        [
            (
                "right.currency",
                "the left side has a currency column: the right side needs one too "
                "(currencies are compared between the sides)",
            )
        ],
    ),
    "currency without amounts": (
        _both(amount=None),
        [
            (
                "left.currency",
                "a currency column is the currency of the side's amounts: name left.amount too",
            ),
            (
                "right.currency",
                "a currency column is the currency of the side's amounts: name right.amount too",
            ),
        ],
    ),
}


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_each_fault_is_a_400_naming_its_field(
    api: httpx.Client, tenant: Tenant, sources: tuple[int, int], fault: str
) -> None:
    change, expected = FAULTS[fault]
    payload = body(sources)
    change(payload)
    found = problems(post(api, tenant, payload), 400)
    bank, ledger = sources
    assert found == [(f, m.format(bank=bank, ledger=ledger)) for f, m in expected]


@pytest.mark.parametrize(
    ("amount", "field"),
    [
        (5, "left.amount"),
        (["Credit", "Debit"], "left.amount"),
        ({"credit": "Credit"}, "left.amount.debit"),
        ({"credit": 5, "debit": "Debit"}, "left.amount.credit"),
        ({"credit": "Credit", "debit": "Debit", "fee": "Fee"}, "left.amount.fee"),
    ],
)
def test_an_amount_of_the_wrong_shape_is_a_422_naming_the_field(
    api: httpx.Client, tenant: Tenant, sources: tuple[int, int], amount: Any, field: str
) -> None:
    payload = body(sources)
    payload["left"]["amount"] = amount
    assert [f for f, _ in problems(post(api, tenant, payload), 422)] == [field]


def test_a_currency_of_the_wrong_shape_is_a_422(
    api: httpx.Client, tenant: Tenant, sources: tuple[int, int]
) -> None:
    payload = body(sources)
    payload["right"]["currency"] = ["EUR"]
    assert [f for f, _ in problems(post(api, tenant, payload), 422)] == ["right.currency"]


def test_the_openapi_schema_gives_both_amount_forms(api: httpx.Client) -> None:
    document = api.get("/api/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    side = schemas["SideBody"]["properties"]
    forms = side["amount"]["anyOf"][0]["oneOf"]
    assert forms[0]["type"] == "string"
    assert forms[1]["$ref"].endswith("/CreditDebitBody")
    assert schemas["CreditDebitBody"]["required"] == ["credit", "debit"]
    assert "upper-cased" in side["currency"]["description"]


def test_a_manual_match_across_currencies_is_a_409_naming_each_row(
    api: httpx.Client, tenant: Tenant, sources: tuple[int, int]
) -> None:
    created = post(api, tenant, body(sources))
    assert created.status_code == 201, created.text
    url = f"{BASE}/{created.json()['id']}/matches"
    across = {"left_rows": [2], "right_rows": [2], "note": "USD against EUR"}
    refused = api.post(url, json=across, headers=tenant.v2_headers)
    assert problems(refused, 409) == [
        (
            "left_rows[0]",
            "left row 2 is in USD, the rows hold EUR, USD: a manual match holds rows of one "
            "currency (no conversion at a rate)",
        ),
        (
            "right_rows[0]",
            "right row 2 is in EUR, the rows hold EUR, USD: a manual match holds rows of one "
            "currency (no conversion at a rate)",
        ),
    ]
    same = {"left_rows": [1], "right_rows": [1]}
    assert api.post(url, json=same, headers=tenant.v2_headers).status_code == 201
