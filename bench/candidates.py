#!/usr/bin/env python3
"""Candidates explained (issue #34, point 4) on the 1M pair: the server time of
`GET /api/v2/reconciliations/{id}/rows/{side}/{row}/candidates`'s service call for open
rows of both sides, after a full run on SQLite (BENCH_BACKENDS picks others).

    .venv/bin/python bench/candidates.py                          # 1M pair
    BENCH_RECON_ROWS=100000 .venv/bin/python bench/candidates.py  # quick

The pair and the passes are bench/reconcile.py's (`tally admin load` of bank.csv and
ledger.csv, `create-reconciliation`, `run-reconciliation`); then, in this process on
the same home, `ReconciliationService.candidates` for BENCH_CANDIDATE_ROWS unmatched
rows of each side and as many matched ones (5 warm-up calls first), sequentially: p50,
p95 and max in milliseconds. Results: BENCH_RESULTS (default
bench/results/candidates-<UTC time>/): `candidates.json`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "src")]

import run  # noqa: E402
from derived_bench import pair_dir, reconciled_pair, tenant  # noqa: E402
from procs import log  # noqa: E402
from reconcile import definition  # noqa: E402
from tally_target import fresh_home  # noqa: E402

WARMUP = 5


def sample(runtime: Any, output_id: int, status: str, side: str, limit: int) -> list[int]:
    """Positions of one side's rows of that status, spread over the output."""
    import sqlalchemy as sa

    from tally.storage import resources

    with runtime.engine.connect() as conn:
        output = resources.get_resource(conn, output_id)
        by_name = {c.name: c.physical for c in output.columns}
        column = by_name[f"{side}._row"]
        rows = conn.execute(
            sa.text(
                f"SELECT {column} FROM {output.table_name} WHERE {by_name['status']} = :s "
                f"AND {column} IS NOT NULL ORDER BY _row_id"
            ),
            {"s": status},
        ).scalars()
        found = [int(r) for r in rows]
    step = max(1, len(found) // limit)
    return found[::step][:limit]


def timings(
    runtime: Any, who: dict[str, Any], rid: int, side: str, rows: list[int]
) -> dict[str, Any]:
    from tally.core.reconciliation import SideName

    service = runtime.reconciliations
    seconds = []
    shown = 0
    for k, row in enumerate([*rows[:WARMUP], *rows]):
        started = time.perf_counter()
        found = service.candidates(
            workspace_id=who["workspace_id"],
            reconciliation_id=rid,
            side=SideName("left" if side == "bank" else "right"),
            row=row,
        )
        if k >= WARMUP:
            seconds.append(time.perf_counter() - started)
            shown += sum(len(p.candidates) for p in found.passes)
    ms = sorted(s * 1000 for s in seconds)
    return {
        "calls": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
        "max_ms": round(ms[-1], 1),
        "candidates_per_call": round(shown / len(ms), 1),
    }


def main() -> int:
    cfg = run.load_config()
    rows = int(os.environ.get("BENCH_RECON_ROWS", "1000000"))
    per = int(os.environ.get("BENCH_CANDIDATE_ROWS", "100"))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    default = REPO / "bench" / "results" / f"candidates-{stamp}"
    cfg.results = Path(os.environ.get("BENCH_RESULTS", str(default))).resolve()
    cfg.logs.mkdir(parents=True, exist_ok=True)
    run.kit_step(cfg, "setup")
    folder = pair_dir(cfg, rows, 42)
    records = []
    for backend in cfg.backends:
        rec: dict[str, Any] = {"backend": backend, "rows": rows}
        with fresh_home(cfg, backend, rec, "candidates") as home:
            admin_log = cfg.logs / f"candidates-{backend}-admin.log"
            who = tenant(home.env, admin_log)
            created = reconciled_pair(cfg, home, who, folder, definition, rec, admin_log)
            os.environ.update(home.env)
            from tally.runtime import build_runtime
            from tally.settings import load_settings

            runtime = build_runtime(load_settings())
            try:
                for status in ("unmatched", "matched"):
                    for side in ("bank", "ledger"):
                        picked = sample(runtime, created["resource_id"], status, side, per)
                        log(f"{backend}: candidates of {len(picked)} {status} {side} rows")
                        rec[f"{status} {side}"] = timings(runtime, who, created["id"], side, picked)
            finally:
                runtime.close()
        records.append(rec)
        log(json.dumps(rec, default=str))
    (cfg.results / "candidates.json").write_text(json.dumps(records, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
