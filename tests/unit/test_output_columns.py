"""The output's columns: the order and types the issue fixes, physical names c0..cN."""

from __future__ import annotations

from decimal import Decimal

from tally.core.columns import Column, ColumnType
from tally.core.reconciliation import (
    CreditDebit,
    MatchPass,
    PassType,
    ReconciliationDefinition,
    Side,
)
from tally.services.reconciliation.output_columns import (
    common_scale,
    open_row_indexes,
    output_columns,
)

BANK = [
    Column("reference", "c0", ColumnType.TEXT),
    Column("amount", "c1", ColumnType.DECIMAL, 2),
    Column("booked", "c2", ColumnType.TIMESTAMP, timezone=True),
]
LEDGER = [Column("amount", "c0", ColumnType.INTEGER), Column("day", "c1", ColumnType.DATE)]


def test_columns_in_order_with_prefixes_and_types() -> None:
    columns = output_columns("bank", "ledger", BANK, LEDGER, 3)
    assert [c.name for c in columns] == [
        "match_id",
        "status",
        "pass",
        "difference",
        "reason",
        "bank._row",
        "bank.reference",
        "bank.amount",
        "bank.booked",
        "ledger._row",
        "ledger.amount",
        "ledger.day",
    ]
    assert [c.physical for c in columns] == [f"c{i}" for i in range(12)]
    by_name = {c.name: c for c in columns}
    assert by_name["difference"] == Column("difference", "c3", ColumnType.DECIMAL, 3)
    assert by_name["bank.amount"].scale == 2
    assert by_name["bank.booked"].timezone
    assert by_name["ledger._row"].type is ColumnType.INTEGER
    assert by_name["ledger.day"].type is ColumnType.DATE


def test_common_scale_takes_amount_columns_and_tolerances() -> None:
    def definition(tolerance: str) -> ReconciliationDefinition:
        return ReconciliationDefinition(
            "r",
            Side("bank", 1, amount="amount"),
            Side("ledger", 2, amount="amount"),
            (MatchPass("p", PassType.ONE_TO_ONE, (), amount_tolerance=Decimal(tolerance)),),
        )

    assert common_scale(definition("0"), BANK, LEDGER) == 2
    assert common_scale(definition("0.005"), BANK, LEDGER) == 3
    assert common_scale(definition("1E+1"), BANK, LEDGER) == 2
    assert common_scale(definition("0.0050"), BANK, LEDGER) == 3
    no_amounts = ReconciliationDefinition("r", Side("a", 1), Side("b", 2), ())
    assert common_scale(no_amounts, BANK, LEDGER) == 0
    # credit and debit both count
    columns = (
        Column("Credit", "c0", ColumnType.DECIMAL, 2),
        Column("Debit", "c1", ColumnType.DECIMAL, 4),
    )
    two = ReconciliationDefinition(
        "r",
        Side("bank", 1, amount=CreditDebit("Credit", "Debit")),
        Side("ledger", 2, amount="amount"),
        (),
    )
    assert common_scale(two, columns, LEDGER) == 4


def test_each_side_has_open_row_indexes_on_its_date_and_amount() -> None:
    """The bank's on its date and amount; a credit and debit ledger without a date: on
    its position only (its view sorts by position, and by no amount column)."""
    ledger = [*LEDGER, Column("credit", "c2", ColumnType.INTEGER)]
    definition = ReconciliationDefinition(
        "r",
        Side("bank", 1, amount="amount", date="booked"),
        Side("ledger", 2, amount=CreditDebit("credit", "amount")),
        (MatchPass("p", PassType.ONE_TO_ONE, ()),),
    )
    columns = output_columns("bank", "ledger", BANK, ledger, 2)
    indexes = open_row_indexes(definition, columns)
    assert [(i.column.name, i.present.name) for i in indexes] == [
        ("bank.booked", "bank._row"),
        ("bank.amount", "bank._row"),
        ("ledger._row", "ledger._row"),
    ]
    assert {(i.equals.name, i.value) for i in indexes} == {("status", "unmatched")}
