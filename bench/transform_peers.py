#!/usr/bin/env python3
"""The transformations of issue #12's benchmark in DuckDB and in pandas: what an analyst
would run instead of tally, on the same CSVs. Run with the kit's venv (duckdb, pandas):

    /tmp/tally-bench/.venv-bench/bin/python bench/transform_peers.py --engine duckdb \\
        --payments /tmp/tally-bench/transactions_1000000_s42.csv \\
        --pair /tmp/tally-bench/pair_1000000_s42

One JSON line per query (transform_queries.py): `seconds` from reading the CSVs to the
result held in memory, `read_seconds` and `query_seconds` apart, the result's checksum
(row count, exact sums), the process's peak RSS so far.

- DuckDB, in memory: the same SQL text as tally's, over tables named as tally's inputs.
  `seconds` is `CREATE TABLE out AS <sql>` over views that read the CSVs (read and query
  in one plan); `query_seconds` is the same statement again over the CSVs loaded into
  tables first (`read_seconds`).
- pandas: `read_csv`, then the same operations (filter and subtraction; groupby; merge).
  Amounts are read as text and turned into integer cents, exactly.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from transform_queries import QUERIES, checksum

TYPES = {
    "id": "BIGINT",
    "txn_date": "DATE",
    "booked_at": "TIMESTAMPTZ",
    "amount": "DECIMAL(18, 2)",
    "currency": "VARCHAR",
    "status": "VARCHAR",
    "counterparty": "VARCHAR",
    "reference": "VARCHAR",
    "channel": "VARCHAR",
    "fee": "DECIMAL(18, 2)",
}
CENTS = re.compile(r"^-?[0-9]+\.[0-9]{2}$")


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def files(args: argparse.Namespace) -> dict[str, Path]:
    return {"t": args.payments, "l": args.pair / "ledger.csv", "b": args.pair / "bank.csv"}


# --- DuckDB ---------------------------------------------------------------------------


def run_duckdb(args: argparse.Namespace) -> list[dict[str, Any]]:
    import duckdb

    columns = "{" + ", ".join(f"'{k}': '{v}'" for k, v in TYPES.items()) + "}"

    def reader(path: Path) -> str:
        return f"read_csv('{path}', header = true, columns = {columns})"

    out = []
    for key, query in QUERIES.items():
        con = duckdb.connect(":memory:")
        for name in query["inputs"]:
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM {reader(files(args)[name])}")
        t0 = time.perf_counter()
        con.execute(f"CREATE TABLE out AS {query['sql']}")
        seconds = time.perf_counter() - t0
        con.close()
        con = duckdb.connect(":memory:")
        t1 = time.perf_counter()
        for name in query["inputs"]:
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {reader(files(args)[name])}")
        read = time.perf_counter() - t1
        t2 = time.perf_counter()
        con.execute(f"CREATE TABLE out AS {query['sql']}")
        query_seconds = time.perf_counter() - t2
        sums = ", ".join(f"SUM({c})" for c in query["sums"])
        counts = "".join(f", COUNT({c})" for c in query["counts"])
        row = con.execute(f"SELECT COUNT(*), {sums}{counts} FROM out").fetchone()
        assert row is not None
        n_sums = len(query["sums"])
        out.append(
            {
                "engine": "duckdb",
                "version": duckdb.__version__,
                "query": key,
                "seconds": round(seconds, 3),
                "read_seconds": round(read, 3),
                "query_seconds": round(query_seconds, 3),
                "checksum": checksum(
                    query, row[0], list(row[1 : 1 + n_sums]), list(row[1 + n_sums :])
                ),
                "peak_rss_mb": peak_rss_mb(),
            }
        )
        con.close()
    return out


# --- pandas ---------------------------------------------------------------------------


def _cents(series: Any) -> Any:
    """Amounts written with exactly two decimals (the generator's form) as integer cents."""
    if not series.str.fullmatch(CENTS).all():
        raise SystemExit("an amount without exactly two decimals: not the kit's CSV")
    return series.str.replace(".", "", regex=False).astype("int64")


def _read(pd: Any, path: Path, keep: list[str]) -> Any:
    dtype = {c: ("int64" if c == "id" else "string") for c in keep}
    frame = pd.read_csv(path, usecols=keep, dtype=dtype)
    for column in ("amount", "fee"):
        if column in frame:
            frame[column] = _cents(frame[column])
    return frame


def _a(pd: Any, inputs: dict[str, Any]) -> Any:
    t = inputs["t"]
    out = t[t["status"] == "settled"].drop(columns=["status"])
    return out.assign(net=out["amount"] - out["fee"])


def _b(pd: Any, inputs: dict[str, Any]) -> Any:
    t = inputs["t"]
    keys = [t["counterparty"], t["currency"], t["txn_date"].str.slice(0, 7)]
    grouped = t.groupby(keys, sort=False)["amount"]
    return grouped.agg(amount="sum", payments="size").reset_index()


def _c(pd: Any, inputs: dict[str, Any]) -> Any:
    ledger, bank = inputs["l"], inputs["b"]
    bank = bank.rename(columns={"id": "bank_id", "txn_date": "bank_date", "amount": "bank_amount"})
    out = ledger.merge(bank, on="reference", how="left")
    out["bank_id"] = out["bank_id"].astype("Int64")
    out["bank_amount"] = out["bank_amount"].astype("Int64")
    return out.assign(difference=out["amount"] - out["bank_amount"])


PANDAS = {
    "a": (_a, {"t": ["id", "txn_date", "booked_at", "amount", "currency", "status",
                     "counterparty", "reference", "channel", "fee"]}),
    "b": (_b, {"t": ["txn_date", "amount", "currency", "counterparty"]}),
    "c": (_c, {"l": ["id", "reference", "txn_date", "amount"],
               "b": ["id", "reference", "txn_date", "amount"]}),
}  # fmt: skip


def run_pandas(args: argparse.Namespace) -> list[dict[str, Any]]:
    import pandas as pd

    out = []
    for key, query in QUERIES.items():
        operation, columns = PANDAS[key]
        t0 = time.perf_counter()
        inputs = {name: _read(pd, files(args)[name], keep) for name, keep in columns.items()}
        t1 = time.perf_counter()
        result = operation(pd, inputs)
        t2 = time.perf_counter()
        sums = [Decimal(int(result[c].sum())).scaleb(-s) for c, s in query["sums"].items()]
        out.append(
            {
                "engine": "pandas",
                "version": pd.__version__,
                "query": key,
                "seconds": round(t2 - t0, 3),
                "read_seconds": round(t1 - t0, 3),
                "query_seconds": round(t2 - t1, 3),
                "checksum": checksum(
                    query, len(result), sums, [int(result[c].count()) for c in query["counts"]]
                ),
                "peak_rss_mb": peak_rss_mb(),
            }
        )
        del inputs, result
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["duckdb", "pandas"], required=True)
    parser.add_argument("--payments", type=Path, required=True)
    parser.add_argument("--pair", type=Path, required=True)
    args = parser.parse_args()
    for line in (run_duckdb if args.engine == "duckdb" else run_pandas)(args):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
