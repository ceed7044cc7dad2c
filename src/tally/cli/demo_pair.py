"""The demo's bank statement and ledger, and the reconciliation that pairs them.

Small and written by hand so that each kind of row a finance team meets is there once:
twins whose references differ only in case and spaces, a one-cent difference two days
later, a payment the ledger books in parts, a pair with no reference in common (only a
suggestion), and rows each side has alone (their reasons say why).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

HEADER = ("id", "txn_date", "amount", "reference", "counterparty")

# (date, amount, reference, counterparty) per row, in booking order.
BANK_ROWS = (
    ("2026-03-02", "1200.00", "INV-1001", "Acme Ltd"),
    ("2026-03-02", "-89.90", "SUB-77", "Harbor Dairy S.A."),
    ("2026-03-03", "310.25", "INV-1002", "Birch Travel S.A."),
    ("2026-03-04", "25.50", "INV-1003", "Quarry Welding GmbH"),
    ("2026-03-05", "1000.00", "INV-1004", "Valley Tutoring Ltd"),
    ("2026-03-05", "42.00", "INV-1005", "Acme Ltd"),
    ("2026-03-06", "-15.00", "FEE-03", "Bank"),
    ("2026-03-09", "640.00", "REF-XY", "Birch Travel S.A."),
    ("2026-03-10", "99.99", "INV-1009", "Harbor Dairy S.A."),
)
LEDGER_ROWS = (
    ("2026-03-02", "1200.00", " inv-1001", "Acme Ltd"),
    ("2026-03-02", "-89.90", "SUB-77", "Harbor Dairy S.A."),
    ("2026-03-03", "310.25", "Inv-1002 ", "Birch Travel S.A."),
    ("2026-03-06", "25.51", "INV-1003", "Quarry Welding GmbH"),
    ("2026-03-05", "600.00", "INV-1004", "Valley Tutoring Ltd"),
    ("2026-03-05", "400.00", "INV-1004", "Valley Tutoring Ltd"),
    ("2026-03-05", "42.07", "INV-1005", "Acme Ltd"),
    ("2026-03-10", "640.00", "PO-5531", "Birch Travel S.A."),
    ("2026-03-11", "18.40", "INV-1010", "Quarry Welding GmbH"),
)


def write_side(path: Path, rows: tuple[tuple[str, str, str, str], ...]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows((n, *row) for n, row in enumerate(rows, start=1))


def definition(bank_id: int, ledger_id: int) -> dict[str, Any]:
    """The issue's example: exact references first, then small differences, then splits,
    then amount and date alone as suggestions."""
    reference = {"left": "reference", "right": "reference"}
    return {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": bank_id, "amount": "amount", "date": "txn_date"},
        "right": {
            "name": "ledger",
            "resource_id": ledger_id,
            "amount": "amount",
            "date": "txn_date",
        },
        "passes": [
            {
                "name": "same reference",
                "type": "one_to_one",
                "keys": [{**reference, "normalize": ["trim", "casefold"]}],
            },
            {
                "name": "reference, small differences",
                "type": "one_to_one",
                "keys": [reference],
                "amount_tolerance": "0.05",
                "date_window": [-3, 3],
            },
            {"name": "split payments", "type": "one_to_many", "keys": [reference]},
            {
                "name": "amount and date only",
                "type": "one_to_one",
                "keys": [],
                "date_window": [-1, 1],
                "auto_confirm": False,
            },
        ],
    }
