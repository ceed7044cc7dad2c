"""Settlements and bank lines, and transformation definitions over them, for the tests of
the transformation API, CLI, runs and the OpenAPI sweeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from support.factories import Tenant, make_source
from tally.runtime import Runtime
from tally.services.transformations.previews import Preview
from tally.storage import resources
from tally.storage.derived import records as derived_records
from tally.storage.resources import Resource

SETTLEMENTS_CSV = (
    "payout_id,currency,amount,status,txn_date\n"
    "PO-1,EUR,10.10,settled,2024-01-05\n"
    "PO-1,EUR,0.015,settled,2024-01-06\n"
    "PO-2,USD,-5.50,settled,2024-01-07\n"
    "PO-2,USD,99.99,void,2024-01-08\n"
    "PO-3,EUR,1000000.001,settled,2024-01-09\n"
)
BANK_CSV = "reference,amount,booked\nPO-1,10.12,2024-01-10\nPO-2,-5.50,2024-01-11\n"
PAYOUTS_SQL = (
    "SELECT s.payout_id, s.currency, SUM(s.amount) AS amount, COUNT(*) AS payments, "
    "MIN(s.txn_date) AS first_date FROM s WHERE s.status = 'settled' "
    "GROUP BY s.payout_id, s.currency"
)
FILTER_SQL = (
    "SELECT s.payout_id, s.amount * 2 AS twice, upper(s.status) AS status FROM s "
    "WHERE s.status = 'settled'"
)


KIND = "transformation"


@dataclass(frozen=True)
class Inputs:
    settlements: int
    bank: int


def make_inputs(engine: Engine, tenant: Tenant) -> Inputs:
    settlements = make_source(engine, tenant, SETTLEMENTS_CSV, name="settlements")
    bank = make_source(engine, tenant, BANK_CSV, name="bank")
    return Inputs(settlements.id, bank.id)


def transformation(
    given: Inputs,
    name: str = "Payouts",
    sql: str = PAYOUTS_SQL,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A definition reading the settlements as `s` (or `inputs`)."""
    bound = {"s": given.settlements} if inputs is None else inputs
    return {"name": name, "inputs": bound, "sql": sql}


def run(runtime: Runtime, derived_id: int) -> dict[str, Any]:
    """Run the transformation now, in this process; its last run."""
    last_run = runtime.derived.run_now(derived_id, kind=KIND, worker="test").last_run
    assert last_run is not None
    return last_run


def output(runtime: Runtime, derived_id: int) -> Resource:
    """The transformation's output resource, as the catalogue holds it now."""
    with runtime.engine.connect() as conn:
        record = derived_records.find_derived(conn, derived_id)
        assert record is not None
        return resources.get_resource(conn, record.resource_id)


def preview(runtime: Runtime, *, workspace_id: int, body: Any) -> Preview:
    """A preview as the API runs it (on the previews' own threads), waited for."""
    return runtime.previews.submit(workspace_id=workspace_id, body=body).result()
