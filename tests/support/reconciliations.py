"""A bank and a ledger source and definitions that reconcile them, for the tests of the
reconciliation API, CLI and the OpenAPI sweeps; and `write_output`, which puts rows in an
output table as a run publishes them (the manual-work tests need matches to act on)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from support.factories import Tenant, make_source
from tally.storage import resources
from tally.storage.resource_tables.ddl import row_table
from tally.storage.schema import resources as resources_table

BANK_CSV = (
    "reference,amount,txn_date,memo\n"
    "REF-1,100.00,2024-01-05,rent\n"
    "REF-2,-5.50,2024-01-06,fee\n"
    "REF-3,20.25,2024-01-07,refund\n"
)
LEDGER_CSV = (
    "reference,amount,txn_date\n"
    "REF-1,100.00,2024-01-05\n"
    "REF-2,-5.50,2024-01-08\n"
    "REF-3,20.00,2024-01-07\n"
    "REF-3,0.25,2024-01-07\n"
)


# The issue's example passes, all four (normalised keys, a pass without keys).
ISSUE_PASSES: list[dict[str, Any]] = [
    {
        "name": "same reference",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference", "normalize": ["trim", "casefold"]}],
    },
    {
        "name": "reference, small differences",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference"}],
        "amount_tolerance": "0.05",
        "date_window": [-3, 3],
    },
    {
        "name": "split payments",
        "type": "one_to_many",
        "keys": [{"left": "reference", "right": "reference"}],
    },
    {
        "name": "amount and date only",
        "type": "one_to_one",
        "keys": [],
        "date_window": [-1, 1],
        "auto_confirm": False,
    },
]


@dataclass(frozen=True)
class Pair:
    bank: int
    ledger: int


def make_pair(engine: Engine, tenant: Tenant) -> Pair:
    bank = make_source(engine, tenant, BANK_CSV, name="bank")
    ledger = make_source(engine, tenant, LEDGER_CSV, name="ledger")
    return Pair(bank.id, ledger.id)


def definition(pair: Pair, name: str = "Bank vs ledger", **changes: Any) -> dict[str, Any]:
    """The issue's example on the pair (its last pass without a date window)."""
    body: dict[str, Any] = {
        "name": name,
        "left": {"name": "bank", "resource_id": pair.bank, "amount": "amount", "date": "txn_date"},
        "right": {
            "name": "ledger",
            "resource_id": pair.ledger,
            "amount": "amount",
            "date": "txn_date",
        },
        "passes": ISSUE_PASSES,
    }
    body.update(changes)
    return copy.deepcopy(body)


def write_output(engine: Engine, resource_id: int, rows: Sequence[dict[str, Any]]) -> None:
    """Rows put in the output's table by their columns' names (the rest empty), as a
    run's publication leaves them."""
    with engine.begin() as conn:
        output = resources.get_resource(conn, resource_id)
        table = row_table(output.table_name, output.columns)
        conn.execute(
            sa.insert(table),
            [{c.physical: row.get(c.name) for c in output.columns} for row in rows],
        )
        conn.execute(
            sa.update(resources_table)
            .where(resources_table.c.id == resource_id)
            .values(row_count=len(rows), data_version=output.data_version + 1)
        )
