#!/usr/bin/env python3
"""The workbench's Exceptions view (issue #34) on the 1M pair: the time of each request
an analyst makes, through `tally serve` on loopback, SQLite first (BENCH_BACKENDS).

    .venv/bin/python bench/workbench.py                          # 1M pair, SQLite
    BENCH_RECON_ROWS=100000 .venv/bin/python bench/workbench.py  # quick

The pair and the passes are bench/reconcile.py's (`tally admin load` of the kit's
bank.csv and ledger.csv, `create-reconciliation`, `run-reconciliation`: 50,144 bank
and 30,006 ledger rows left open at 1M). Then `tally serve` without its worker (the
runs each action queues are not run, so nothing else holds the database meanwhile),
an analyst signed in through the console's forms, and one after another on one
keep-alive connection (BENCH_WORKBENCH_REQUESTS each, default 50, after 5 warm-ups):

- the view as it opens (both sides' oldest 50, counts, Selection);
- the view filtered and sorted on both sides, deep pages;
- "Match": a POST of 20 rows (the 10 oldest open rows of each side, with a note: their
  sums differ), then the view it sends the browser to (the 20 rows gone, the message);
- the candidates panel of one open row (a different one each time, of both sides).

Each time is the request's wall time on loopback (the server's time and a round trip).
Target: every one under 150 ms at p95. Results: BENCH_RESULTS (default
bench/results/workbench-<UTC time>/workbench.json).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "src")]

import run  # noqa: E402
import tally_target as tt  # noqa: E402
from derived_bench import fresh_home, load_sources, pair_dir, tenant, timed_run  # noqa: E402
from procs import log, stop  # noqa: E402
from reconcile import definition  # noqa: E402

from console import signed_in_user  # noqa: E402

REQUESTS = int(os.environ.get("BENCH_WORKBENCH_REQUESTS", "50"))
WARMUP = 5
TARGET_P95_MS = 150.0
ROWS_PER_SIDE = 10  # a match of 20 rows
FILTERED = (
    "left_sort=-amount&left_min=-500&left_max=500&left_page=200"
    "&right_sort=age&right_from=2024-01-01&right_page=100"
)


def figures(times: list[float], response: httpx.Response | None = None) -> dict[str, Any]:
    ms = sorted(times)
    shown = re.findall(r"rows [0-9,]+\u2013[0-9,]+ of [0-9,]+", response.text) if response else []
    return {
        "requests": len(ms),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
        "max_ms": round(ms[-1], 1),
        "shows": sorted(set(shown)),
        "under_target": ms[int(0.95 * (len(ms) - 1))] < TARGET_P95_MS,
    }


def timed(send: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    started = time.perf_counter()
    response = send()
    return (time.perf_counter() - started) * 1000, response


def view_times(client: httpx.Client, path: str) -> dict[str, Any]:
    times, response = [], None
    for k in range(WARMUP + REQUESTS):
        took, response = timed(lambda: client.get(path))
        response.raise_for_status()
        if k >= WARMUP:
            times.append(took)
    return {"path": path, **figures(times, response)}


def open_rows(page: str, side: str) -> list[int]:
    return [int(r) for r in re.findall(rf'name="{side}" value="(\d+)" data-side', page)]


def match_times(client: httpx.Client, path: str) -> dict[str, Any]:
    """POST a match of the oldest open rows of each side, then GET the view it answers
    with; the next match takes the rows that view shows first."""
    posts, views = [], []
    page = client.get(path).text
    for k in range(WARMUP + REQUESTS):
        form: dict[str, Any] = {
            "action": "match",
            "left": open_rows(page, "left")[:ROWS_PER_SIDE],
            "right": open_rows(page, "right")[:ROWS_PER_SIDE],
            "note": "bench: a month-end match",
            "view": "",
        }
        took, answer = timed(lambda form=form: client.post(path, data=form))
        if answer.status_code != 303:
            raise RuntimeError(f"the match answered {answer.status_code}: {answer.text[:500]}")
        target = answer.headers["location"]
        shown, response = timed(lambda target=target: client.get(target))
        response.raise_for_status()
        page = response.text
        if "Matched bank rows" not in page:
            raise RuntimeError("the view after a match does not say what was matched")
        if k >= WARMUP:
            posts.append(took)
            views.append(shown)
    return {"post": figures(posts), "view after": figures(views, response)}


def candidates_times(client: httpx.Client, path: str) -> dict[str, Any]:
    """The panel of open rows of each side, a different row each request (from the
    view's deep pages, so the rows are spread over the output)."""
    rows = []
    for page_number in (2, 40, 400):
        page = client.get(f"{path}?left_page={page_number}&right_page={page_number // 2}").text
        rows += [("left", r) for r in open_rows(page, "left")[:10]]
        rows += [("right", r) for r in open_rows(page, "right")[:10]]
    times, response = [], None
    for k, (side, row) in enumerate((rows * 4)[: WARMUP + REQUESTS]):
        url = f"{path}?candidates={side}:{row}"
        took, response = timed(lambda url=url: client.get(url))
        response.raise_for_status()
        if k >= WARMUP:
            times.append(took)
    return figures(times, response)


def measure(base: str, env: dict[str, str], who: dict[str, Any], rid: int) -> dict[str, Any]:
    client = signed_in_user(env, base, str(who["workspace_id"]), role="analyst")
    path = f"/console/reconciliations/{rid}/exceptions"
    try:
        found: dict[str, Any] = {}
        log("the view, as it opens")
        found["view"] = view_times(client, path)
        log("the view, filtered and sorted, deep pages")
        found["view filtered, sorted, deep"] = view_times(client, f"{path}?{FILTERED}")
        log("candidates panels")
        found["candidates panel"] = candidates_times(client, path)
        log("matches of 20 rows and the view after each")
        found["match of 20 rows"] = match_times(client, path)
        return found
    finally:
        client.close()


def main() -> int:
    cfg = run.load_config()
    rows = int(os.environ.get("BENCH_RECON_ROWS", "1000000"))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    default = REPO / "bench" / "results" / f"workbench-{stamp}"
    cfg.results = Path(os.environ.get("BENCH_RESULTS", str(default))).resolve()
    cfg.logs.mkdir(parents=True, exist_ok=True)
    folder = pair_dir(cfg, rows, 42)
    records = []
    for backend in cfg.backends:
        rec: dict[str, Any] = {"backend": backend, "rows": rows, "load_before": os.getloadavg()}
        with fresh_home(cfg, backend, rec, "workbench") as home:
            admin_log = cfg.logs / f"workbench-{backend}-admin.log"
            who = tenant(home.env, admin_log)
            files = {"bank": folder / "bank.csv", "ledger": folder / "ledger.csv"}
            loads = load_sources(cfg, home, who, files, rec)
            spec = home.path / "recon.json"
            spec.write_text(
                json.dumps(definition(loads["bank"]["resource_id"], loads["ledger"]["resource_id"]))
            )
            args = ["admin", "create-reconciliation", "--workspace", str(who["workspace_id"])]
            created = tt.tally_cli([*args, "--file", str(spec)], home.env, admin_log)
            log(f"{backend}: run-reconciliation")
            rec["run"] = timed_run(home, "run-reconciliation", created["id"], admin_log)
            env = {**home.env, "TALLY_SERVE_WORKER": "false"}
            server = tt.start_server(cfg, env, home.db_pids)
            try:
                rec.update(measure(server.base_url, env, who, created["id"]))
            finally:
                stop(server.proc)
        rec["load_after"] = os.getloadavg()
        records.append(rec)
        log(json.dumps(rec, default=str))
    (cfg.results / "workbench.json").write_text(json.dumps(records, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
