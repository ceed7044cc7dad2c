"""The three transformations of issue #12's benchmark, shared by tally's side
(transform.py) and the peers' (transform_peers.py, run with the kit's venv: standard
library only here).

Each reads inputs by name: `t` the kit's payments CSV, `l` and `b` the pair's ledger.csv
and bank.csv. The same SQL text is given to tally and to DuckDB. Outputs are compared by
a checksum: the row count, and for the named columns their exact sums (`scale`
fractional digits) or their counts of non-NULL values."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

QUERIES: dict[str, dict[str, Any]] = {
    "a": {
        "title": "(a) filter + computed column",
        "name": "Settled payments, net of fees",
        "inputs": ("t",),
        "sql": (
            "SELECT t.id, t.txn_date, t.booked_at, t.counterparty, t.reference, t.currency, "
            "t.channel, t.amount, t.fee, t.amount - t.fee AS net "
            "FROM t WHERE t.status = 'settled'"
        ),
        "sums": {"amount": 2, "fee": 2, "net": 2},
        "counts": (),
    },
    "b": {
        "title": "(b) GROUP BY counterparty, currency, month",
        "name": "Payments per counterparty, currency and month",
        "inputs": ("t",),
        "sql": (
            "SELECT t.counterparty, t.currency, date_trunc('month', t.txn_date) AS month, "
            "SUM(t.amount) AS amount, COUNT(*) AS payments FROM t "
            "GROUP BY t.counterparty, t.currency, date_trunc('month', t.txn_date)"
        ),
        "sums": {"amount": 2, "payments": 0},
        "counts": (),
    },
    "c": {
        "title": "(c) ledger LEFT JOIN bank by reference",
        "name": "Ledger lines with their bank lines",
        "inputs": ("l", "b"),
        "sql": (
            "SELECT l.id AS ledger_id, l.reference, l.txn_date, l.amount, b.id AS bank_id, "
            "b.txn_date AS bank_date, b.amount AS bank_amount, "
            "l.amount - b.amount AS difference "
            "FROM l LEFT JOIN b ON b.reference = l.reference"
        ),
        "sums": {"amount": 2, "bank_amount": 2, "difference": 2},
        "counts": ("bank_id",),
    },
}


def exact(value: Any, scale: int) -> str:
    """A sum as exact decimal text with `scale` fractional digits (NULL: "0")."""
    number = Decimal(0 if value is None else value)
    return str(number.quantize(Decimal(1).scaleb(-scale))) if scale else str(int(number))


def checksum(
    query: dict[str, Any], rows: int, sums: list[Any], counts: list[Any]
) -> dict[str, Any]:
    """`sums` and `counts` in the order of the query's `sums` and `counts`."""
    out: dict[str, Any] = {"rows": int(rows)}
    for (name, scale), value in zip(query["sums"].items(), sums, strict=True):
        out[f"sum({name})"] = exact(value, scale)
    for name, value in zip(query["counts"], counts, strict=True):
        out[f"count({name})"] = int(value)
    return out


def checksum_sql(query: dict[str, Any], table: str, physical: dict[str, str]) -> str:
    """The checksum's SELECT over an output table (`physical`: column name -> its name
    in `table`)."""
    parts = ["COUNT(*)"]
    parts += [f"SUM({physical[name]})" for name in query["sums"]]
    parts += [f"COUNT({physical[name]})" for name in query["counts"]]
    return f"SELECT {', '.join(parts)} FROM {table}"
