"""The matching engine alone on a gen_transactions.py --pair folder: time and peak memory.

  .venv/bin/python bench/reconciliation_engine.py --dir /tmp/pair1m [--profile out.prof]

Reads bank.csv and ledger.csv into SideRows (as the runs would from the database), then
times `reconcile` with the issue's first three passes (tests/support/reconciliation_pairs.py)
and prints one JSON object: seconds, peak RSS before and after, counts, truth found.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]

from support.reconciliation_pairs import (  # noqa: E402
    PEER_DEFINITION,
    SCALE,
    content_lookup,
    read_side,
    read_truth,
)
from tally.core.reconciliation import ManualWork, SideName  # noqa: E402
from tally.services.reconciliation.matching import reconcile  # noqa: E402


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--profile", type=Path, help="write a cProfile of reconcile here")
    args = parser.parse_args()
    paths = {SideName.LEFT: args.dir / "bank.csv", SideName.RIGHT: args.dir / "ledger.csv"}
    t0 = time.perf_counter()
    left = read_side(paths[SideName.LEFT], PEER_DEFINITION, SideName.LEFT)
    right = read_side(paths[SideName.RIGHT], PEER_DEFINITION, SideName.RIGHT)
    read_seconds = time.perf_counter() - t0
    peak_before = _peak_mb()
    profiler = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    outcome = reconcile(
        PEER_DEFINITION, left, right, ManualWork(), scale=SCALE, content=content_lookup(paths)
    )
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    seconds = time.perf_counter() - t0
    truth, _, _ = read_truth(args.dir / "truth.csv")
    pairs = {(m.left[0], r) for m in outcome.matches for r in m.right}
    result = {
        "bank_rows": len(left),
        "ledger_rows": len(right),
        "read_seconds": round(read_seconds, 2),
        "reconcile_seconds": round(seconds, 2),
        "peak_rss_mb_before": peak_before,
        "peak_rss_mb_after": _peak_mb(),
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
