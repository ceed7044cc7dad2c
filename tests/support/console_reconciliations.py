"""The reconciliations the console's reconciliation tests share: `reconciled` (over
HTTP: matched, with a difference, suggested and unmatched rows on both sides, credits
and debits) and `month_of_payments` (in the browser: a month of invoices and fees, with
the labels a finance team's files carry)."""

from __future__ import annotations

from typing import Any

from support.factories import Tenant, make_source
from support.reconciliations import Pair, definition
from tally.runtime import Runtime

# Matched, with a difference, suggested (X-1 with Y-9: the keyless pass does
# not confirm); unmatched bank rows 3 and 4, ledger rows 4 and 5.
BANK_CSV = (
    "reference,amount,txn_date,memo\n"
    "A-1,100.00,2024-01-05,rent\n"
    "A-2,-40.00,2024-01-06,fee\n"
    "A-3,-7.25,2024-01-02,<b>refund</b>\n"
    "A-4,12.00,2024-01-09,x\n"
    "X-1,55.00,2024-01-10,y\n"
)
LEDGER_CSV = (
    "reference,amount,txn_date\n"
    "A-1,100.00,2024-01-05\n"
    "A-2,-40.03,2024-01-07\n"
    "Y-9,55.00,2024-01-10\n"
    "Z-1,-3.00,2024-01-03\n"
    "Z-2,8.00,2024-01-04\n"
)

MONTH_BANK_CSV = (
    "booked_on,reference,amount,counterparty\n"
    "2026-11-02,INV-1040,4800.00,Northwind GmbH\n"
    "2026-11-09,INV-1041,-1250.00,Harbor Dairy S.A.\n"
    "2026-11-16,INV-1042,1250.00,Acme Ltd\n"
    "2026-11-23,INV-1043,-310.25,Blue Fin Logistics\n"
    "2026-11-24,FEE-11,-2.50,Bank fee\n"
    "2026-11-05,REF-77,95.10,Unknown transfer\n"
)
MONTH_LEDGER_CSV = (
    "entry,date,reference,amount\n"
    "1,2026-11-02,INV-1040,4800.00\n"
    "2,2026-11-10,INV-1041,-1250.04\n"
    "3,2026-11-16,INV-1042,1250.00\n"
    "4,2026-11-23,PAY-9,-310.25\n"
    "5,2026-11-12,INV-1039,640.00\n"
)


def reconciled(runtime: Runtime, tenant: Tenant, *, run: bool = True) -> tuple[int, int, Pair]:
    """A reconciliation of BANK_CSV and LEDGER_CSV (run once unless `run` is False): its
    id, its output's id, and the pair."""
    bank = make_source(runtime.engine, tenant, BANK_CSV, name="bank statement")
    ledger = make_source(runtime.engine, tenant, LEDGER_CSV, name="ledger")
    pair = Pair(bank.id, ledger.id)
    created = runtime.reconciliations.create(
        workspace_id=tenant.workspace_id, body=definition(pair)
    )
    if run:
        runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    return created.id, created.resource_id, pair


def month_of_payments(
    runtime: Runtime, tenant: Tenant, passes: list[dict[str, Any]]
) -> tuple[int, int]:
    """Bank vs ledger of MONTH_*_CSV by these passes, run: its id and its output's id."""
    bank = make_source(runtime.engine, tenant, MONTH_BANK_CSV, name="Bank statement (EUR)")
    ledger = make_source(runtime.engine, tenant, MONTH_LEDGER_CSV, name="General ledger")
    body = {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": bank.id, "amount": "amount", "date": "booked_on"},
        "right": {"name": "ledger", "resource_id": ledger.id, "amount": "amount", "date": "date"},
        "passes": passes,
    }
    created = runtime.reconciliations.create(workspace_id=tenant.workspace_id, body=body)
    runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    return created.id, created.resource_id
