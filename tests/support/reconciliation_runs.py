"""Reconciliations for the tests of their runs: a bank and a ledger source with a split
payment, a definition over them, the reconciliation created as POST creates it, and its
output and state read back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from support.factories import Tenant, make_source, read_data
from tally.runtime import Runtime
from tally.services.reconciliation.service import ReconciliationService
from tally.storage import resources
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord

BANK_CSV = (
    "reference,amount,txn_date,memo\n"
    "REF-1,100.00,2024-01-05,rent\n"
    "REF-2,25.50,2024-01-06,coffee\n"
    "REF-3,10.00,2024-01-07,split\n"
    "REF-4,99.99,2024-01-08,bank only\n"
)
LEDGER_CSV = (
    "reference,amount,txn_date,account\n"
    "REF-2,25.50,2024-01-06,6000\n"
    "REF-1,100.00,2024-01-05,4000\n"
    "REF-3,4.00,2024-01-07,7000\n"
    "REF-3,6.00,2024-01-08,7000\n"
    "REF-9,1.00,2024-01-09,9999\n"
)


def definition_json(
    left_id: int, right_id: int, *, passes: list[Any] | None = None, name: str = "Bank vs ledger"
) -> Any:
    return {
        "name": name,
        "left": {"name": "bank", "resource_id": left_id, "amount": "amount", "date": "txn_date"},
        "right": {
            "name": "ledger",
            "resource_id": right_id,
            "amount": "amount",
            "date": "txn_date",
        },
        "passes": passes
        or [
            {
                "name": "same reference",
                "type": "one_to_one",
                "keys": [{"left": "reference", "right": "reference"}],
            },
            {
                "name": "split payments",
                "type": "one_to_many",
                "keys": [{"left": "reference", "right": "reference"}],
                "date_window": [0, 3],
            },
        ],
    }


def make_reconciliation(engine: Engine, tenant: Tenant, definition: Any) -> DerivedRecord:
    """The reconciliation and its empty output, its first run queued (POST's service)."""
    created = ReconciliationService(engine).create(
        workspace_id=tenant.workspace_id, body=definition
    )
    with engine.connect() as conn:
        record = derived_records.find_derived(conn, created.id)
    assert record is not None
    return record


def bank_and_ledger(
    runtime: Runtime, tenant: Tenant, bank: str = BANK_CSV, ledger: str = LEDGER_CSV
) -> tuple[int, int]:
    left = make_source(runtime.engine, tenant, bank, name="bank")
    right = make_source(runtime.engine, tenant, ledger, name="ledger")
    return left.id, right.id


def derived(runtime: Runtime, derived_id: int) -> DerivedRecord:
    with runtime.engine.connect() as conn:
        record = derived_records.find_derived(conn, derived_id)
    assert record is not None
    return record


def output_resource(runtime: Runtime, record: DerivedRecord) -> resources.Resource:
    with runtime.engine.connect() as conn:
        return resources.get_resource(conn, record.resource_id)


def output_rows(runtime: Runtime, tenant: Tenant, record: DerivedRecord, **query: Any) -> Any:
    return read_data(runtime, tenant, record.resource_id, **query)
