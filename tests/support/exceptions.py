"""A bank and a ledger whose exceptions the workbench's Exceptions view shows (its HTTP
and browser tests): one pair matched, the rest left open on both sides, with amounts a
float would round (0.10 + 0.20 against 0.30; 12345678901234567.89), a fee with no
counterpart, and a pair 12.25 apart; and a bank whose references are searched in part."""

from __future__ import annotations

from typing import Any

from support.factories import Tenant, make_source
from tally.runtime import Runtime

BANK_CSV = (
    "reference,amount,txn_date,memo\n"
    "A-1,100.00,2024-01-05,rent\n"  # 1: matched with ledger 1
    "B-1,0.10,2024-01-02,part one\n"  # 2
    "B-2,0.20,2024-01-03,part two\n"  # 3
    "B-3,12345678901234567.89,2024-01-10,big\n"  # 4
    "B-4,-7.25,2024-01-01,<b>refund</b>\n"  # 5: the oldest
    "FEE,-2.50,2024-01-20,bank fee\n"  # 6
)
LEDGER_CSV = (
    "reference,amount,txn_date\n"
    "A-1,100.00,2024-01-05\n"  # 1: matched with bank 1
    "C-1,0.30,2024-01-04\n"  # 2
    "C-2,12345678901234567.89,2024-01-11\n"  # 3
    "C-3,5.00,2024-01-15\n"  # 4
    "B-4,-7.20,2024-01-30\n"  # 5: bank 5's reference, 0.05 and 29 days away
)
# The bank with references to search in part (the text filter's tests): rows 7-16
REFERENCES = [
    "INV-2024-001",
    "inv-2031",
    "ACME Ltd",
    "acme-2",
    "Müller GmbH",
    "50%_off",
    "50xyoff",
    "back\\slash",
    "O'Brien",
    "INV-19",
]
SEARCHABLE_BANK_CSV = BANK_CSV + "".join(
    f'"{ref}",{n}.00,2024-02-{n:02d},more\n' for n, ref in enumerate(REFERENCES, 1)
)
KEY = [{"left": "reference", "right": "reference"}]
PASSES: list[dict[str, Any]] = [
    {"name": "same reference", "type": "one_to_one", "keys": KEY},
    {
        "name": "reference, small differences",
        "type": "one_to_one",
        "keys": KEY,
        "amount_tolerance": "0.01",
        "date_window": [-3, 3],
    },
]
OPEN = {"left": [2, 3, 4, 5, 6], "right": [2, 3, 4, 5]}  # the rows the run leaves open
NAMES = {"left": "bank", "right": "ledger"}


def reconciled(
    runtime: Runtime, tenant: Tenant, *, bank: str = BANK_CSV, run: bool = True
) -> tuple[int, int]:
    """The reconciliation of the pair, run once (unless not `run`): its id and its
    output's id."""
    engine = runtime.engine
    left = make_source(engine, tenant, bank, name="Bank statement")
    right = make_source(engine, tenant, LEDGER_CSV, name="General ledger")
    body = {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": left.id, "amount": "amount", "date": "txn_date"},
        "right": {
            "name": "ledger",
            "resource_id": right.id,
            "amount": "amount",
            "date": "txn_date",
        },
        "passes": PASSES,
    }
    created = runtime.reconciliations.create(workspace_id=tenant.workspace_id, body=body)
    if run:
        runtime.derived.run_now(created.id, kind="reconciliation", worker="test")
    return created.id, created.resource_id
