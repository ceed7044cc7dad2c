"""The matching engine alone on a gen_transactions.py --pair folder: time and peak memory.

  .venv/bin/python bench/reconciliation_engine.py --dir /tmp/pair1m [--profile out.prof]

Reads bank.csv and ledger.csv into SideTables (as the runs do from the database), then
times `reconcile` with the issue's first three passes (tests/support/reconciliation_pairs.py)
and prints one JSON object: seconds (wall and CPU), the engine's own peak memory (peak RSS
during the engine minus RSS with the inputs read), counts, truth found.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]

from support.reconciliation_pairs import (  # noqa: E402
    ISSUE_DEFINITION,
    PEER_DEFINITION,
    SCALE,
    content_lookup,
    read_side,
    read_truth,
)
from tally.core.reconciliation import ManualWork, SideName  # noqa: E402
from tally.processes.collector import paused_collector  # noqa: E402
from tally.services.reconciliation.matching import SideTable, output_rows, reconcile  # noqa: E402


def _status_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak since the last reset) of this process, in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    raise LookupError(field)


def _reset_peak() -> None:
    """Linux: writing 5 to clear_refs resets VmHWM, so the peak is the engine's own."""
    Path("/proc/self/clear_refs").write_text("5")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--profile", type=Path, help="write a cProfile of reconcile here")
    parser.add_argument(
        "--definition",
        choices=("peers", "issue"),
        default="peers",
        help="peers: recon_peers.py's three passes (default); issue: the issue's four",
    )
    args = parser.parse_args()
    definition = PEER_DEFINITION if args.definition == "peers" else ISSUE_DEFINITION
    paths = {SideName.LEFT: args.dir / "bank.csv", SideName.RIGHT: args.dir / "ledger.csv"}
    t0 = time.perf_counter()
    left = SideTable.of(read_side(paths[SideName.LEFT], definition, SideName.LEFT))
    right = SideTable.of(read_side(paths[SideName.RIGHT], definition, SideName.RIGHT))
    read_seconds = time.perf_counter() - t0
    gc.collect()
    _reset_peak()
    rss_before = _status_mb("VmRSS")
    profiler = cProfile.Profile() if args.profile else None
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    with paused_collector():  # as a run builds (services/derived/runs.py)
        outcome = reconcile(
            definition, left, right, ManualWork(), scale=SCALE, content=content_lookup(paths)
        )
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - cpu0
    t0 = time.perf_counter()
    output_count = sum(1 for _ in output_rows(outcome))
    output_seconds = time.perf_counter() - t0
    peak = _status_mb("VmHWM")
    truth, _, _ = read_truth(args.dir / "truth.csv")
    pairs = {(m.left[0], r) for m in outcome.matches for r in m.right}
    result = {
        "definition": args.definition,
        "bank_rows": len(left),
        "ledger_rows": len(right),
        "read_seconds": round(read_seconds, 2),
        "reconcile_seconds": round(seconds, 2),
        "reconcile_cpu_seconds": round(cpu_seconds, 2),
        "output_rows_seconds": round(output_seconds, 2),
        "output_rows": output_count,
        "rss_mb_with_inputs": rss_before,
        "peak_rss_mb_during_engine": peak,
        "engine_peak_mb": round(peak - rss_before, 1),
        "load_average": os.getloadavg()[0],
        "matches": len(outcome.matches),
        "unmatched_left": len(outcome.unmatched_left),
        "unmatched_right": len(outcome.unmatched_right),
        "truth_pairs": len(truth),
        "truth_found": len(pairs & truth),
        "wrong_pairs": len(pairs - truth),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
