"""A reconciliation for the workbench's tests (HTTP and browser): bank vs ledger, run
once, with two automatic matches (one with a difference), three suggestions (one with a
difference) and two unmatched bank rows (fees), and `run`, a run now in the test's
process."""

from __future__ import annotations

from support.factories import Tenant, make_source
from tally.runtime import Runtime

BANK_CSV = (
    "reference,amount,txn_date,memo\n"
    "A-1,100.00,2024-01-05,rent\n"
    "A-2,-40.00,2024-01-06,fee\n"
    "X-1,55.00,2024-01-10,<b>one</b>\n"
    "X-2,66.10,2024-01-11,two\n"
    "X-3,77.20,2024-01-12,three\n"
    "F-1,-2.50,2024-01-13,bank fee\n"
    "F-2,-3.75,2024-01-14,bank fee\n"
)
LEDGER_CSV = (
    "reference,amount,txn_date\n"
    "A-1,100.00,2024-01-05\n"
    "A-2,-40.03,2024-01-07\n"
    "Y-1,55.00,2024-01-10\n"
    "Y-2,66.10,2024-01-11\n"
    "Y-3,77.25,2024-01-12\n"
    "Z-1,8.00,2024-01-04\n"
)
KEY = [{"left": "reference", "right": "reference"}]
PASSES = [
    {"name": "same reference", "type": "one_to_one", "keys": KEY},
    {
        "name": "reference, small differences",
        "type": "one_to_one",
        "keys": KEY,
        "amount_tolerance": "0.05",
        "date_window": [-3, 3],
    },
    {
        "name": "amount and date",
        "type": "one_to_one",
        "keys": [],
        "amount_tolerance": "0.10",
        "auto_confirm": False,
    },
]


def reconciled(runtime: Runtime, tenant: Tenant) -> tuple[int, int]:
    """Bank vs ledger, run once: two automatic matches (one with a difference), three
    suggestions (one with a difference), two unmatched bank rows."""
    bank = make_source(runtime.engine, tenant, BANK_CSV, name="bank")
    ledger = make_source(runtime.engine, tenant, LEDGER_CSV, name="ledger")
    body = {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": bank.id, "amount": "amount", "date": "txn_date"},
        "right": {
            "name": "ledger",
            "resource_id": ledger.id,
            "amount": "amount",
            "date": "txn_date",
        },
        "passes": PASSES,
    }
    created = runtime.reconciliations.create(workspace_id=tenant.workspace_id, body=body)
    run(runtime, created.id)
    return created.id, created.resource_id


def run(runtime: Runtime, reconciliation_id: int) -> None:
    runtime.derived.run_now(reconciliation_id, kind="reconciliation", worker="test")
