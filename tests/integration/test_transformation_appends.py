"""Incremental transformation runs append to the published output in place, on both
backends: the table is not rebuilt, its rows keep their row ids and the new ones follow,
its indexes stay built, and the rows equal a full recompute."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine

from support.factories import Tenant, append, read_data
from support.transformations import (
    FILTER_SQL,
    Inputs,
    make_inputs,
    output,
    run,
    transformation,
)
from tally.runtime import Runtime

SETTLEMENT = "payout_id,currency,amount,status,txn_date\n"


@pytest.fixture
def inputs(runtime: Runtime, tenant: Tenant) -> Inputs:
    return make_inputs(runtime.engine, tenant)


def filtered(runtime: Runtime, tenant: Tenant, inputs: Inputs, name: str = "Payouts") -> int:
    """A filter + computed column transformation (incremental), run once: its id."""
    body = transformation(inputs, name=name, sql=FILTER_SQL)
    derived_id = runtime.transformations.create(workspace_id=tenant.workspace_id, body=body).id
    assert run(runtime, derived_id)["incremental"] is False  # the first run is full
    return derived_id


def identity(engine: Engine, table: str) -> Any:
    """What names the table's storage: rebuilding it (a new table renamed in) changes it."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return conn.exec_driver_sql(f"SELECT '{table}'::regclass::oid").scalar_one()
        sql = "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?"
        return conn.exec_driver_sql(sql, (table,)).scalar_one()


def stored(engine: Engine, table: str) -> list[tuple[int, str]]:
    with engine.connect() as conn:
        found = conn.exec_driver_sql(f"SELECT _row_id, _json FROM {table} ORDER BY _row_id")
        return [(int(row_id), str(text)) for row_id, text in found]


def test_an_incremental_run_appends_to_the_published_output_in_place(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    derived_id = filtered(runtime, tenant, inputs)
    before = output(runtime, derived_id)
    kept = stored(runtime.engine, before.table_name)
    place = identity(runtime.engine, before.table_name)
    append(runtime, inputs.settlements, SETTLEMENT + "PO-7,EUR,2.50,settled,2024-02-01\n"
           "PO-8,EUR,3.00,void,2024-02-02\nPO-9,USD,-0.125,settled,2024-02-03\n")  # fmt: skip
    last_run = run(runtime, derived_id)
    after = output(runtime, derived_id)
    assert (last_run["incremental"], last_run["rows"], after.row_count) == (True, 6, 6)
    assert identity(runtime.engine, after.table_name) == place  # not rebuilt
    rows = stored(runtime.engine, after.table_name)
    assert rows[: len(kept)] == kept  # the published rows as they were, new ones after
    assert [row_id for row_id, _ in rows] == list(range(1, 7))
    assert (after.data_version, after.indexed_version) == (before.data_version + 1,) * 2
    assert read_data(runtime, tenant, after.id)[-2:] == [
        {"payout_id": "PO-7", "twice": 5.0, "status": "SETTLED"},
        {"payout_id": "PO-9", "twice": -0.25, "status": "SETTLED"},
    ]
    with runtime.engine.connect() as conn:  # the plan went with the patch that read it
        assert not conn.dialect.has_table(conn, f"{after.table_name}_plan")
    full = filtered(runtime, tenant, inputs, name="full")
    assert read_data(runtime, tenant, output(runtime, full).id) == read_data(
        runtime, tenant, after.id
    )


def test_appended_rows_all_filtered_out_change_nothing_and_are_not_read_again(
    runtime: Runtime, tenant: Tenant, inputs: Inputs
) -> None:
    derived_id = filtered(runtime, tenant, inputs)
    append(runtime, inputs.settlements, SETTLEMENT + "PO-7,EUR,2.50,settled,2024-02-01\n")
    run(runtime, derived_id)
    version = output(runtime, derived_id).data_version
    append(runtime, inputs.settlements, SETTLEMENT + "PO-8,EUR,3.00,void,2024-02-02\n")
    last_run = run(runtime, derived_id)
    assert last_run["incremental"] is True
    assert last_run["read_through"] == {"s": 7}
    assert output(runtime, derived_id).data_version == version
    again = run(runtime, derived_id)  # nothing new: the same rows, the same digest
    assert again["rows_token"] == last_run["rows_token"]
    assert output(runtime, derived_id).data_version == version
