"""Formats per column (#32, point 1): `tally admin load` of the kit's 1M-row CSV in its
clean form, beside the same rows as a German bank writes them (`;`, a preamble of
account lines, dates `DD.MM.YYYY`, amounts `1.234,56` with `DR` for negatives, a totals
line), both with declared columns (`--columns`), on both backends.

    .venv/bin/python bench/formats.py    # writes bench/results/formats-*.json

Each load is a new source of a fresh installation's workspace, timed as the command's
wall time (it returns once the rows are committed and readable); clean and formatted
alternate, BENCH_FORMATS_REPEATS times each (default 2), and the medians are compared.
The target: formatted within 1.3x of clean.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import ingest  # noqa: E402
import procs  # noqa: E402

CSV = ingest.CSV
REPEATS = int(os.environ.get("BENCH_FORMATS_REPEATS", "2"))
BACKENDS = os.environ.get("BENCH_BACKENDS", "sqlite,postgresql").split(",")
CLEAN_COLUMNS: list[dict[str, Any]] = [
    {"name": "id", "type": "integer"},
    {"name": "txn_date", "type": "date"},
    {"name": "booked_at", "type": "timestamp", "timezone": True},
    {"name": "amount", "type": "decimal"},
    {"name": "currency", "type": "text"},
    {"name": "status", "type": "text"},
    {"name": "counterparty", "type": "text"},
    {"name": "reference", "type": "text"},
    {"name": "channel", "type": "text"},
    {"name": "fee", "type": "decimal"},
]
GERMAN_NUMBER = {"decimal_separator": ",", "thousands_separator": ".", "negative": ["dr_cr"]}


def german_columns() -> dict[str, Any]:
    columns = []
    for column in CLEAN_COLUMNS:
        if column["name"] == "txn_date":
            column = {**column, "format": "DD.MM.YYYY"}
        elif column["type"] == "decimal":
            column = {**column, **GERMAN_NUMBER}
        columns.append(column)
    return {"columns": columns, "skip_leading_lines": 3, "skip_trailing_lines": 1}


def german_amount(text: str) -> str:
    value = Decimal(text)
    whole, _, fraction = format(abs(value), "f").partition(".")
    written = f"{int(whole):,}".replace(",", ".") + ("," + fraction if fraction else "")
    return written + " DR" if value < 0 else written


def write_german(clean: Path, out: Path) -> None:
    """The clean file's rows as a German bank writes them."""
    with clean.open(newline="") as source, out.open("w", newline="") as target:
        reader = csv.reader(source)
        writer = csv.writer(target, delimiter=";", lineterminator="\n")
        target.write("Kontonummer;DE12 5001 0517 0648 4898 90\nZeitraum;2023 - 2026\n\n")
        header = next(reader)
        writer.writerow(header)
        date, amount, fee = (header.index(n) for n in ("txn_date", "amount", "fee"))
        for row in reader:
            y, m, d = row[date].split("-")
            row[date] = f"{d}.{m}.{y}"
            row[amount] = german_amount(row[amount])
            if row[fee]:
                row[fee] = german_amount(row[fee])
            writer.writerow(row)
        target.write("Summe;;;;;;;;;\n")


def load_seconds(env: dict[str, str], workspace: str, name: str, file: Path, cols: Path) -> float:
    started = time.monotonic()
    shown = ingest.tally(
        [
            "admin",
            "load",
            "--workspace",
            workspace,
            "--name",
            name,
            "--columns",
            str(cols),
            str(file),
        ],
        env,
    )
    seconds = time.monotonic() - started
    procs.log(f"{name}: {shown['rows']} rows")
    return seconds


def main() -> None:
    work = Path(os.environ.get("BENCH_FORMATS_DIR", "/tmp/tally-bench"))
    german = work / (CSV.stem + "_german.csv")
    if not german.exists():
        procs.log(f"writing {german}")
        write_german(CSV, german)
    clean_cols, german_cols = work / "formats_clean.json", work / "formats_german.json"
    clean_cols.write_text(json.dumps({"columns": CLEAN_COLUMNS}))
    german_cols.write_text(json.dumps(german_columns()))
    results: dict[str, Any] = {"file": str(CSV), "repeats": REPEATS}
    for backend in BACKENDS:
        env = ingest.installation(backend)
        workspace = ingest.tenant(env)["x-svc-workspace"]
        times: dict[str, list[float]] = {"clean": [], "formatted": []}
        for i in range(REPEATS):
            for kind, file, cols in (
                ("clean", CSV, clean_cols),
                ("formatted", german, german_cols),
            ):
                seconds = load_seconds(env, workspace, f"{kind} {i}", file, cols)
                times[kind].append(round(seconds, 2))
                procs.log(f"{backend}: {kind} {seconds:.2f} s")
        clean, formatted = (statistics.median(times[k]) for k in ("clean", "formatted"))
        results[backend] = {**times, "ratio": round(formatted / clean, 3)}
        procs.stop_everything()
    ingest.write_results("formats", results)


if __name__ == "__main__":
    main()
