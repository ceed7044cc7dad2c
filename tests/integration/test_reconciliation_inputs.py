"""What a reconciliation's run reads of a side (storage/reconciliation_inputs.py), on both
backends: every row in row id order as columns, keys as text with empty as None,
amounts as exact integers at the run's scale (credit minus debit where a side has
both), dates as day ordinals, across the read's batches (SQLite reads each batch as JSON
arrays, PostgreSQL as the driver's rows)."""

from __future__ import annotations

import datetime as dt

import pytest

from support.factories import Tenant, append, make_source
from tally.core.columns import ColumnType
from tally.core.reconciliation import SideName
from tally.runtime import Runtime
from tally.services.reconciliation.incremental import Input
from tally.services.reconciliation.runs import _read_both
from tally.storage import reconciliation_inputs, resources
from tally.storage.engine import snapshot_connection
from tally.storage.reconciliation_inputs import SideColumns
from tally.storage.resource_tables import ddl

LINES = [
    ("REF-1", "12.30", "2024-02-29"),
    ("", "-0.05", "2024-03-01"),
    ('Zürich "quoted" ✓', "", "2024-03-02"),
    ("REF-4", "99999999.99", ""),
    ("  spaced  ", "0.00", "1999-12-31"),
]


def model(scale: int) -> list[tuple[str | None, int | None, int | None]]:
    """The plain reading of LINES: (key, amount at `scale`, day ordinal)."""
    out = []
    for key, amount, day in LINES:
        scaled = None
        if amount:
            whole, _, fraction = amount.partition(".")
            sign = -1 if whole.startswith("-") else 1
            digits = int(whole.lstrip("-") + fraction.ljust(scale, "0"))
            scaled = sign * digits
        out.append((key or None, scaled, dt.date.fromisoformat(day).toordinal() if day else None))
    return out


@pytest.mark.parametrize("batch", [2, 200_000])
@pytest.mark.parametrize("scale", [2, 4])
def test_a_side_reads_as_the_plain_model_in_any_batch_size(
    runtime: Runtime,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    batch: int,
    scale: int,
) -> None:
    content = "reference,amount,txn_date\n" + "".join(
        f'"{k.replace(chr(34), chr(34) * 2)}",{a},{d}\n' for k, a, d in LINES
    )
    source = make_source(runtime.engine, tenant, content)
    named = {c.name: c for c in source.columns}
    wanted = SideColumns(keys=(named["reference"],), amount=named["amount"], date=named["txn_date"])
    monkeypatch.setattr(reconciliation_inputs, "READ_BATCH_ROWS", batch)
    with runtime.engine.begin() as conn:
        row_ids = [
            int(r[0])
            for r in conn.exec_driver_sql(
                f"SELECT {ddl.ROW_ID} FROM {source.table_name} ORDER BY {ddl.ROW_ID}"
            )
        ]
        whole = reconciliation_inputs.read_side(conn, source.table_name, wanted, scale)
        later = reconciliation_inputs.read_side(
            conn, source.table_name, wanted, scale, after=row_ids[1]
        )
        some = reconciliation_inputs.read_side(
            conn, source.table_name, wanted, scale, row_ids=[row_ids[4], row_ids[0]]
        )
    expected = model(scale)

    def rows(values: reconciliation_inputs.SideValues) -> list[tuple[object, ...]]:
        return list(zip(values.row_ids, values.keys[0], values.amounts, values.days, strict=True))

    assert rows(whole) == [(i, *e) for i, e in zip(row_ids, expected, strict=True)]
    assert rows(later) == [(i, *e) for i, e in zip(row_ids[2:], expected[2:], strict=True)]
    assert rows(some) == [(row_ids[0], *expected[0]), (row_ids[4], *expected[4])]
    assert all(type(a) is int for a in whole.amounts if a is not None)  # never a float


@pytest.mark.parametrize("appended", [False, True])
def test_a_run_reads_both_sides_in_its_own_snapshot(
    runtime: Runtime, tenant: Tenant, appended: bool
) -> None:
    """The right side is read on a second connection at the same time as the left
    (runs._read_both): only when that connection sees the data version the run's
    snapshot saw; a delivery between the two is not in the run's rows."""
    content = "reference,amount,txn_date\nREF-1,1.00,2024-01-01\nREF-2,2.00,2024-01-02\n"
    sources = [make_source(runtime.engine, tenant, content) for _ in range(2)]
    with snapshot_connection(runtime.engine) as conn, conn.begin():
        sides = []
        for which, source in zip((SideName.LEFT, SideName.RIGHT), sources, strict=True):
            resource = resources.get_resource(conn, source.id)
            named = {c.name: c for c in resource.columns}
            wanted = SideColumns((named["reference"],), named["amount"], named["txn_date"])
            sides.append(Input(which, resource, wanted))
        if appended:
            append(runtime, sources[1].id, "reference,amount,txn_date\nREF-3,3.00,2024-01-03\n")
        left, right = _read_both(runtime.engine, conn, sides, 2)
    for side in (left, right):
        assert list(side.rows.keys[0]) == ["REF-1", "REF-2"]
        assert list(side.rows.amounts) == [100, 200]
        assert len(side.row_ids) == 2


@pytest.mark.parametrize("batch", [2, 200_000])
def test_credit_and_debit_read_as_one_signed_amount(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Credit minus debit, at the run's scale whatever each column's own (an integer
    debit, a credit of 3 places): an empty cell counts as 0, both empty is no amount."""
    content = (
        "reference,debit,credit\n"
        "IN,,12.345\n"
        "OUT,7,\n"
        "BOTH,2,0.5\n"
        "NONE,,\n"
        "ZERO,0,0.000\n"
        "NEGATIVE,-3,\n"
    )
    source = make_source(runtime.engine, tenant, content)
    named = {c.name: c for c in source.columns}
    assert (named["debit"].type, named["credit"].scale) == (ColumnType.INTEGER, 3)
    wanted = SideColumns((named["reference"],), named["credit"], None, debit=named["debit"])
    monkeypatch.setattr(reconciliation_inputs, "READ_BATCH_ROWS", batch)
    with runtime.engine.begin() as conn:
        values = reconciliation_inputs.read_side(conn, source.table_name, wanted, 4)
    assert list(zip(values.keys[0], values.amounts, strict=True)) == [
        ("IN", 123450),
        ("OUT", -70000),
        ("BOTH", -15000),
        ("NONE", None),
        ("ZERO", 0),
        ("NEGATIVE", 30000),
    ]
    assert all(type(a) is int for a in values.amounts if a is not None)
