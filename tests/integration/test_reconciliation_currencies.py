"""Reconciliations of files shaped like real exports (issue #32, points 3 and 4), end to
end on both backends: a bank export with separate Debit and Credit columns against a
ledger of signed amounts, and three currencies on both sides whose amounts coincide
across currencies; the output, its reasons, last_run's amounts per currency, manual work
across currencies, and incremental runs equal to full ones."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.factories import Tenant, append, make_source
from support.reconciliation_cases import per_side
from support.reconciliation_runs import (
    INCREMENTAL_EXAMPLES,
    assert_same_as_full,
    make_reconciliation,
    output_rows,
    run,
)
from tally.core.errors import ConflictError
from tally.runtime import Runtime
from tally.services.reconciliation.service import ReconciliationService
from tally.storage.derived.records import DerivedRecord

# A bank's export: money out in Debit, money in in Credit, the other cell empty; the
# currency as the bank writes it (lower case, padded); a balance line with neither.
BANK_EXPORT = (
    "Booking date,Reference,Debit,Credit,Currency,Text\n"
    "2026-10-01,INV-1001,,1200.00,EUR,Customer payment\n"
    "2026-10-01,INV-1002,350.00,,EUR,Supplier invoice\n"
    "2026-10-02,INV-1003,100.00,,usd ,Card payment\n"
    "2026-10-02,INV-1004,,100.00,GBP,Transfer in\n"
    "2026-10-03,FEE-10,2.50,,EUR,Account fee\n"
    "2026-10-03,INV-1006,40.00,0.75,EUR,Payment net of a refund\n"
    "2026-10-04,BAL,,,EUR,Balance carried\n"
)
# The ledger: one signed amount (receipts positive, payments negative).
LEDGER_EXPORT = (
    "posted,reference,amount,currency,account\n"
    "2026-10-01,INV-1001,1200.00,EUR,4000\n"
    "2026-10-01,INV-1002,-350.00,EUR,2000\n"
    "2026-10-02,INV-1003,-100.00,USD,6000\n"
    "2026-10-02,INV-1004,100.00,EUR,1200\n"
    "2026-10-03,FEE-10,-2.50,EUR,6500\n"
    "2026-10-03,INV-1006,-39.25,EUR,2000\n"
)


def side(name: str, resource_id: int, amount: Any, date: str, currency: str | None) -> Any:
    named = {"name": name, "resource_id": resource_id, "amount": amount, "date": date}
    return {**named, "currency": currency} if currency else named


def bank_against_ledger(
    runtime: Runtime, tenant: Tenant, *, currency: bool = True
) -> DerivedRecord:
    bank = make_source(runtime.engine, tenant, BANK_EXPORT, name="bank").id
    ledger = make_source(runtime.engine, tenant, LEDGER_EXPORT, name="ledger").id
    credit_debit = {"credit": "Credit", "debit": "Debit"}
    return make_reconciliation(
        runtime.engine,
        tenant,
        {
            "name": "Bank vs ledger",
            "left": side(
                "bank", bank, credit_debit, "Booking date", "Currency" if currency else None
            ),
            "right": side("ledger", ledger, "amount", "posted", "currency" if currency else None),
            "passes": [
                {
                    "name": "reference",
                    "type": "one_to_one",
                    "keys": [{"left": "Reference", "right": "reference"}],
                    "amount_tolerance": "0.05",
                }
            ],
        },
    )


def reconciled(
    runtime: Runtime, tenant: Tenant, record: DerivedRecord
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run's last_run and the output's rows."""
    return run(runtime, record), output_rows(runtime, tenant, record, page_size=50)


def by_reference(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["bank.Reference"] or r["ledger.reference"]: r for r in rows}


def test_debit_and_credit_are_one_signed_amount_and_the_output_keeps_both(
    runtime: Runtime, tenant: Tenant
) -> None:
    last_run, output = reconciled(
        runtime, tenant, bank_against_ledger(runtime, tenant, currency=False)
    )
    rows = by_reference(output)
    paid_in, paid_out = rows["INV-1001"], rows["INV-1002"]
    assert (paid_in["status"], paid_in["difference"]) == ("matched", 0)
    assert (paid_in["bank.Debit"], paid_in["bank.Credit"]) == (None, 1200)
    assert (paid_out["status"], paid_out["difference"]) == ("matched", 0)
    assert (paid_out["bank.Debit"], paid_out["bank.Credit"]) == (350, None)
    assert rows["FEE-10"]["status"] == "matched"
    both = rows["INV-1006"]  # 0.75 - 40.00 = -39.25
    assert (both["status"], both["difference"]) == ("matched", 0)
    assert (both["bank.Debit"], both["bank.Credit"]) == (40, 0.75)
    # Without currencies, the GBP transfer meets the EUR line as today.
    assert rows["INV-1004"]["status"] == "matched"
    balance = rows["BAL"]  # both cells empty: no amount
    assert balance["status"] == "unmatched"
    assert balance["reason"] == "no ledger row with reference 'BAL'"
    assert last_run["amounts"] == per_side(("808.25", "0.00"), ("808.25", "0.00"))


def test_rows_of_different_currencies_never_match_and_the_reason_says_so(
    runtime: Runtime, tenant: Tenant
) -> None:
    last_run, rows = reconciled(runtime, tenant, bank_against_ledger(runtime, tenant))
    found = by_reference(rows)
    assert found["INV-1003"]["status"] == "matched"  # "usd " is USD
    assert found["INV-1001"]["status"] == "matched"
    gbp = [r for r in rows if "INV-1004" in (r["bank.Reference"], r["ledger.reference"])]
    assert [(r["status"], r["difference"]) for r in gbp] == [("unmatched", None)] * 2
    assert gbp[0]["reason"] == (
        "reference: nearest ledger row 4 (reference INV-1004): currency differs: GBP against EUR"
    )
    assert gbp[1]["reason"] == (
        "reference: nearest bank row 4 (Reference INV-1004): currency differs: EUR against GBP"
    )
    assert last_run["counts"]["unmatched_left"] == 2  # the GBP transfer, the balance line
    assert last_run["amounts"] == {
        "EUR": per_side(("808.25", "0.00"), ("808.25", "100.00")),
        "GBP": per_side(("0.00", "100.00"), ("0.00", "0.00")),
        "USD": per_side(("-100.00", "0.00"), ("-100.00", "0.00")),
    }


THREE_CURRENCIES_BANK = (
    "date,ref,amount,ccy\n"
    "2026-11-02,P-1,100.00,USD\n"
    "2026-11-02,P-2,100.00,EUR\n"
    "2026-11-02,P-3,100.00,GBP\n"
    "2026-11-03,,250.00,EUR\n"
    "2026-11-03,,250.00,USD\n"
    "2026-11-04,P-6,75.00,\n"
)
THREE_CURRENCIES_LEDGER = (
    "date,ref,amount,ccy\n"
    "2026-11-02,P-1,100.00,EUR\n"  # the same references, the currencies turned round
    "2026-11-02,P-2,100.00,GBP\n"
    "2026-11-02,P-3,100.00,USD\n"
    "2026-11-03,X-9,250.00,GBP\n"  # the same amount and date in a third currency
    "2026-11-03,X-8,250.00,usd\n"
    "2026-11-04,P-6,75.00,EUR\n"
)


def three_currencies(runtime: Runtime, tenant: Tenant) -> DerivedRecord:
    bank = make_source(runtime.engine, tenant, THREE_CURRENCIES_BANK, name="bank").id
    ledger = make_source(runtime.engine, tenant, THREE_CURRENCIES_LEDGER, name="ledger").id
    return make_reconciliation(
        runtime.engine,
        tenant,
        {
            "name": "three currencies",
            "left": side("bank", bank, "amount", "date", "ccy"),
            "right": side("ledger", ledger, "amount", "date", "ccy"),
            "passes": [
                {"name": "ref", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]},
                {"name": "split", "type": "one_to_many", "keys": [{"left": "ref", "right": "ref"}]},
                {
                    "name": "amount and date",
                    "type": "one_to_one",
                    "keys": [],
                    "auto_confirm": False,
                },
            ],
        },
    )


def test_amounts_that_coincide_across_three_currencies_match_only_within_one(
    runtime: Runtime, tenant: Tenant
) -> None:
    last_run, rows = reconciled(runtime, tenant, three_currencies(runtime, tenant))
    pairs = [
        (r["bank._row"], r["ledger._row"], r["bank.ccy"], r["ledger.ccy"])
        for r in rows
        if r["status"] != "unmatched"
    ]
    # Never by reference (each reference's rows are in two currencies); by amount and
    # date, each row with the row of its own currency.
    assert pairs == [
        (1, 3, "USD", "USD"),
        (2, 1, "EUR", "EUR"),
        (3, 2, "GBP", "GBP"),
        (5, 5, "USD", "usd"),
    ]
    reasons = {(r["bank._row"], r["ledger._row"]): r["reason"] for r in rows}
    assert reasons[4, None] == (
        "bank keys are empty: no pass can match this row; amount and date: nearest ledger "
        "row 6: amount differs by 175.00, tolerance 0.00; ledger date 1 day later, window 0..0"
    )
    assert reasons[None, 4] == (  # the GBP row taken: not the free rows of other currencies
        "no bank row with ref 'X-9'; amount and date: bank row 3 was matched to ledger "
        "row 2 by pass 'amount and date'"
    )
    assert reasons[6, None] == "ref: nearest ledger row 6 (ref P-6): bank currency is empty"
    assert reasons[None, 6] == "ref: nearest bank row 6 (ref P-6): bank currency is empty"
    assert (last_run["counts"]["suggested"], last_run["counts"]["matched"]) == (4, 0)
    assert last_run["amounts"] == {  # every match a suggestion
        "": per_side(("0.00", "75.00"), ("0.00", "0.00"), status="suggested"),
        "EUR": per_side(("100.00", "250.00"), ("100.00", "75.00"), status="suggested"),
        "GBP": per_side(("100.00", "0.00"), ("100.00", "250.00"), status="suggested"),
        "USD": per_side(("350.00", "0.00"), ("350.00", "0.00"), status="suggested"),
    }


def test_a_manual_match_across_currencies_is_a_conflict_naming_each_row(
    runtime: Runtime, tenant: Tenant
) -> None:
    record = three_currencies(runtime, tenant)
    run(runtime, record)
    service = ReconciliationService(runtime.engine)
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": record.id}
    with pytest.raises(ConflictError) as refused:
        service.match(**ids, left_rows=[1], right_rows=[1, 3], note="USD against EUR")
    assert [(p.field, p.message) for p in refused.value.problems] == [
        (
            "left_rows[0]",
            "left row 1 is in USD, the rows hold EUR, USD: a manual match holds rows of one "
            "currency (no conversion at a rate)",
        ),
        (
            "right_rows[0]",
            "right row 1 is in EUR, the rows hold EUR, USD: a manual match holds rows of one "
            "currency (no conversion at a rate)",
        ),
        (
            "right_rows[1]",
            "right row 3 is in USD, the rows hold EUR, USD: a manual match holds rows of one "
            "currency (no conversion at a rate)",
        ),
    ]
    # One currency, a row of an empty currency with it: the analyst vouches for it.
    assert service.match(**ids, left_rows=[1, 6], right_rows=[3], note="checked") == 1
    last_run = run(runtime, record)
    manual = [
        r for r in output_rows(runtime, tenant, record, page_size=50) if r["pass"] == "manual"
    ]
    assert [(r["bank._row"], r["ledger._row"], r["difference"]) for r in manual] == [
        (1, 3, 75),
        (6, 3, 75),
    ]
    assert last_run["amounts"][""] == per_side(("75.00", "0.00"), ("0.00", "0.00"), status="manual")


def test_a_definition_given_currencies_later_never_sums_two_in_a_manual_match(
    runtime: Runtime, tenant: Tenant
) -> None:
    """A manual match made before the sides named currencies stands, without a
    difference: it would add dollars and euros."""
    record = three_currencies(runtime, tenant)
    service = ReconciliationService(runtime.engine)
    body = dict(record.definition)
    plain = {k: v for k, v in body["left"].items() if k != "currency"}
    service.replace(
        workspace_id=tenant.workspace_id,
        derived_id=record.id,
        body={**body, "left": plain, "right": {**body["right"], "currency": None}},
    )
    ids = {"workspace_id": tenant.workspace_id, "reconciliation_id": record.id}
    service.match(**ids, left_rows=[1], right_rows=[1], note="across currencies")
    service.replace(workspace_id=tenant.workspace_id, derived_id=record.id, body=body)
    run(runtime, record)
    [manual] = [r for r in output_rows(runtime, tenant, record) if r["pass"] == "manual"]
    assert (manual["status"], manual["difference"]) == ("manual", None)


# --- incremental runs give what full runs give ---------------------------------------------

HEADER = "ref,Debit,Credit,ccy,day"
FILLER = "\n".join(f"FILL-{n},0.00,{n}.00,EUR,2026-01-01" for n in range(100))
REFS = st.sampled_from(["A", "B", "C"])
CELLS = st.sampled_from(["", "1.00", "2.00", "3.00"])
CURRENCY_CELLS = st.sampled_from(["USD", "EUR", " usd", ""])
ROWS = st.lists(st.tuples(REFS, CELLS, CELLS, CURRENCY_CELLS), max_size=5)


def csv(rows: list[tuple[str, str, str, str]]) -> str:
    return "".join(f"{r},{d},{c},{ccy},2026-01-01\n" for r, d, c, ccy in rows)


@INCREMENTAL_EXAMPLES
@given(bank=ROWS, ledger=ROWS, late_bank=ROWS, late_ledger=ROWS)
def test_incremental_after_full_is_full_with_currencies_and_debit_credit(
    runtime: Runtime,
    tenant: Tenant,
    bank: list[tuple[str, str, str, str]],
    ledger: list[tuple[str, str, str, str]],
    late_bank: list[tuple[str, str, str, str]],
    late_ledger: list[tuple[str, str, str, str]],
) -> None:
    sources = [
        make_source(runtime.engine, tenant, f"{HEADER}\n{FILLER}\n{csv(rows)}").id
        for rows in (bank, ledger)
    ]
    record = make_reconciliation(
        runtime.engine,
        tenant,
        {
            "name": f"incremental {sources[0]}",
            "left": side("bank", sources[0], {"credit": "Credit", "debit": "Debit"}, "day", "ccy"),
            "right": side("ledger", sources[1], "Credit", "day", "ccy"),
            "passes": [
                {"name": "ref", "type": "one_to_one", "keys": [{"left": "ref", "right": "ref"}]},
                {
                    "name": "near",
                    "type": "one_to_one",
                    "keys": [{"left": "ref", "right": "ref"}],
                    "amount_tolerance": "1.00",
                },
                {"name": "split", "type": "many_to_one", "keys": [{"left": "ref", "right": "ref"}]},
            ],
        },
    )
    assert run(runtime, record)["mode"] == "full"
    for source, rows in zip(sources, (late_bank, late_ledger), strict=True):
        if rows:
            append(runtime, source, f"{HEADER}\n{csv(rows)}")
    assert run(runtime, record)["mode"] == "incremental"
    assert_same_as_full(runtime, tenant, record)
