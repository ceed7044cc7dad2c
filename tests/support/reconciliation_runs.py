"""Reconciliations for the tests of their runs: a bank and a ledger source with a split
payment, a definition over them, the reconciliation created as POST creates it, and its
output and state read back; rows appended to a source, a run, and the comparison of an
incremental run's result with a full run's (`assert_same_as_full`)."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, settings
from sqlalchemy import Engine

from support.factories import Tenant, make_source, read_data
from tally.runtime import Runtime
from tally.services.reconciliation.service import ReconciliationService
from tally.storage import resources
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.resource_tables import ddl

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


# The examples of a property comparing incremental runs with full ones: each is a few
# sources and runs on a real database.
INCREMENTAL_EXAMPLES = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def run(runtime: Runtime, record: DerivedRecord) -> dict[str, Any]:
    done = runtime.derived.run_now(record.id, kind="reconciliation", worker="test")
    assert done.last_run is not None
    return done.last_run


def stored_rows(runtime: Runtime, record: DerivedRecord) -> Counter[tuple[Any, ...]]:
    """The output's stored rows, every column but the row id (its JSON text included)."""
    with runtime.engine.connect() as conn:
        resource = resources.get_resource(conn, record.resource_id)
        result = conn.exec_driver_sql(f"SELECT * FROM {resource.table_name}")
        names = list(result.keys())
        rows = Counter(
            tuple(v for k, v in zip(names, row, strict=True) if k != ddl.ROW_ID) for row in result
        )
        assert resource.row_count == sum(rows.values())
    return rows


def assert_same_as_full(
    runtime: Runtime, tenant: Tenant, record: DerivedRecord, *, manual: Any = None
) -> dict[str, Any]:
    """A fresh reconciliation of the same inputs, run full (after the same manual
    actions), has the same output rows, counts, amounts (signed and absolute, matched
    per status too: summing to matched) and oldest unmatched dates as `record`."""
    mine = derived(runtime, record.id)
    assert mine.last_run is not None
    other = make_reconciliation(
        runtime.engine,
        tenant,
        {**mine.definition, "name": f"full {mine.id}"},
    )
    if manual is not None:  # the actions as taken on `record`, on an output like its own
        run(runtime, other)
        manual(other)
    full = run(runtime, other)
    assert full["mode"] == "full"
    assert stored_rows(runtime, mine) == stored_rows(runtime, other)
    assert mine.last_run["counts"] == full["counts"]
    for figure in ("amounts", "absolute_amounts", "oldest_unmatched"):
        assert mine.last_run[figure] == full[figure], figure
    assert_split_sums(full)
    return mine.last_run


def assert_split_sums(last_run: dict[str, Any]) -> None:
    """Every side's matched amounts per status (of each currency) are kept, and sum to
    its matched amount, signed and absolute."""
    for figure in ("amounts", "absolute_amounts"):
        found = last_run[figure]
        per_currency = [found] if set(found) <= {"left", "right"} else list(found.values())
        for per_side in per_currency:
            for totals in filter(None, per_side.values()):
                split = totals["matched_by_status"]
                assert set(split) == {"matched", "matched_with_difference", "suggested", "manual"}
                assert sum(map(Decimal, split.values())) == Decimal(totals["matched"]), figure
