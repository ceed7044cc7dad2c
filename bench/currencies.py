"""Currencies named on both sides (#32, point 4) at 1M rows: the kit's 1M pair reconciled
with its three passes, beside the same definition whose sides name their `currency`
column, over the same two sources, on both backends.

    BENCH_KIT=/work/shared/bench .venv/bin/python bench/currencies.py
    # writes bench/results/currencies-*.json

Each backend gets a fresh installation; `reconciliation_run.py setup --currencies` loads
bank.csv and ledger.csv once and creates both reconciliations; then
`reconciliation_run.py run` (a forced full run in a fresh process) of one and of the
other alternate, BENCH_CURRENCIES_REPEATS times each (default 2). The pair's twins share
their currency, so both definitions must find the same matches: the counts are compared.
The pair (`gen_transactions.py --pair --rows 1000000 --seed 42`) is made in BENCH_PAIR
(default /tmp/tally-bench/pair_1000000_s42) when it is not there.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import ingest  # noqa: E402
import procs  # noqa: E402

PYTHON = HERE.parent / ".venv" / "bin" / "python"
PAIR = Path(os.environ.get("BENCH_PAIR", "/tmp/tally-bench/pair_1000000_s42"))
KIT = Path(os.environ.get("BENCH_KIT", HERE.parent.parent / "shared" / "bench"))
REPEATS = int(os.environ.get("BENCH_CURRENCIES_REPEATS", "2"))
BACKENDS = os.environ.get("BENCH_BACKENDS", "sqlite,postgresql").split(",")
RUN_TIMEOUT_SECONDS = 1800


def run_json(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """reconciliation_run.py's one JSON line."""
    out = subprocess.run(
        [str(PYTHON), str(HERE / "reconciliation_run.py"), *args],
        env=env,
        cwd=env["TALLY_HOME"],
        capture_output=True,
        text=True,
        check=True,
        timeout=RUN_TIMEOUT_SECONDS,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ensure_pair() -> None:
    if (PAIR / "ledger.csv").exists():
        return
    procs.log(f"generating {PAIR}")
    subprocess.run(
        [
            sys.executable,
            str(KIT / "gen_transactions.py"),
            *("--pair", "--rows", "1000000", "--seed", "42", "--out", str(PAIR)),
        ],
        check=True,
        timeout=RUN_TIMEOUT_SECONDS,
    )


def backend_runs(backend: str) -> dict[str, Any]:
    env = ingest.installation(backend)
    started = time.monotonic()
    ids = run_json(["setup", "--dir", str(PAIR), "--currencies"], env)
    procs.log(f"{backend}: set up in {time.monotonic() - started:.0f} s: {ids}")
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "currencies": []}
    for i in range(REPEATS):
        for kind, derived_id in (("plain", ids["id"]), ("currencies", ids["with_currencies"])):
            shown = run_json(["run", "--id", str(derived_id)], env)
            shown["load_average"] = os.getloadavg()[0]
            runs[kind].append(shown)
            procs.log(f"{backend}: {kind} {i}: readable after {shown['readable_after']} s")
    plain, named = (statistics.median(r["readable_after"] for r in runs[k]) for k in runs)
    counts = {kind: [r["counts"] for r in found] for kind, found in runs.items()}
    return {
        **runs,
        "same_counts": all(c == counts["plain"][0] for c in counts["plain"] + counts["currencies"]),
        "ratio": round(named / plain, 3),
    }


def main() -> None:
    ensure_pair()
    results: dict[str, Any] = {"pair": str(PAIR), "repeats": REPEATS}
    try:
        for backend in BACKENDS:
            results[backend] = backend_runs(backend)
            procs.stop_everything()
    finally:
        procs.stop_everything()
    ingest.write_results("currencies", results)


if __name__ == "__main__":
    main()
