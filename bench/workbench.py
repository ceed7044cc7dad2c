#!/usr/bin/env python3
"""The workbench's Exceptions view (issue #34) on the 1M pair: the time of each request
an analyst makes, through `tally serve` on loopback, with the open items the run leaves
and then with the issue's 30,000, SQLite first (BENCH_BACKENDS).

    .venv/bin/python bench/workbench.py                          # 1M pair, both modes
    BENCH_RECON_ROWS=100000 .venv/bin/python bench/workbench.py  # quick
    BENCH_WORKBENCH_OPEN=30000 .venv/bin/python bench/workbench.py  # 30,000 open only

The pair and the passes are bench/reconcile.py's (derived_bench.reconciled_pair: `tally
admin load` of the kit's bank.csv and ledger.csv, `create-reconciliation`,
`run-reconciliation`: 50,144 bank and 30,006 ledger rows left open at 1M). Then `tally
serve` without its worker (the runs each action queues are not run, so nothing else
holds the database meanwhile), an analyst signed in through the console's forms, and one
after another on one keep-alive connection (BENCH_WORKBENCH_REQUESTS each, default 50,
after 5 warm-ups):

- the view as it opens (both sides' oldest 50, counts, Selection);
- the view filtered and sorted on both sides, deep pages;
- the candidates panel of one open row (a different one each time, of both sides);
- "Match": a POST of 20 rows (the 10 oldest open rows of each side, with a note: their
  sums differ), then the view it sends the browser to (the 20 rows gone, the message).

BENCH_WORKBENCH_OPEN (default `run,30000`) names the open items of each round, in
order, on the same server: `run` as the run left them (80,150 at 1M, the harder case),
a number N as the issue states it: every open row of each side read from the side's
"Export CSV" (not the Data API, whose reads would start column snapshots of the output
that are still being built while the requests are timed), then all but N resolved
through the API
(`POST /api/v2/reconciliations/{id}/resolutions`, reason `timing`, 10,000 rows a
request), each side keeping its share of N spread evenly over its positions, so the
rows left open span every date (`open` and `resolve_s` in the results).

Each time is the request's wall time on loopback (the server's time and a round trip).
Target: every one under 150 ms at p95. Results: BENCH_RESULTS (default
bench/results/workbench-<UTC time>/workbench.json), one record per backend with a
round per mode (`open: run`, `open: 30000`), each with the load average before and after.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
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
from derived_bench import api, pair_dir, reconciled_pair, tenant  # noqa: E402
from procs import log, stop  # noqa: E402
from reconcile import definition  # noqa: E402
from tally_target import fresh_home  # noqa: E402

from console import signed_in_user  # noqa: E402

REQUESTS = int(os.environ.get("BENCH_WORKBENCH_REQUESTS", "50"))
# The open items measured: "run" as the run leaves them, a number after resolving the rest.
OPEN_MODES = os.environ.get("BENCH_WORKBENCH_OPEN", "run,30000").split(",")
RESOLVE_CHUNK = 10_000  # rows a resolution takes at most (the API's limit)
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


def measure(client: httpx.Client, rid: int) -> dict[str, Any]:
    path = f"/console/reconciliations/{rid}/exceptions"
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


def open_positions(
    client: httpx.Client, reconciliation_id: int, which: str, name: str
) -> list[int]:
    """Every open row of a side (its `<side>._row`), from the side's "Export CSV", as an
    analyst gets them: read through the open rows' own indexes. (Through the Data API
    each read would start a column snapshot of the 1M-row output at each new data
    version, seconds of CPU still being spent while the requests are timed.)"""
    url = f"/console/reconciliations/{reconciliation_id}/exceptions/export.csv"
    answer = client.get(url, params={"side": which}, timeout=600)
    answer.raise_for_status()
    return sorted(int(r[f"{name}._row"]) for r in csv.DictReader(io.StringIO(answer.text)))


def leave_open(
    server: tt.Server,
    client: httpx.Client,
    who: dict[str, Any],
    created: dict[str, Any],
    keep: int,
) -> dict[str, int]:
    """Resolve open rows (POST .../resolutions, reason `timing`, 10,000 rows each) until
    `keep` are left, each side keeping its share, spread evenly over its positions (so
    what stays open spans every date); the open rows per side afterwards."""
    sides = {"left": "bank", "right": "ledger"}
    rows = {s: open_positions(client, created["id"], s, n) for s, n in sides.items()}
    everything = sum(len(r) for r in rows.values())
    left = {s: len(r) * keep // everything for s, r in rows.items()}
    left["right"] = keep - left["left"]
    for side, positions in rows.items():
        n, kept = len(positions), left[side]
        stays = {positions[i * n // kept] for i in range(kept)} if kept else set()
        closing = [r for r in positions if r not in stays]
        for at in range(0, len(closing), RESOLVE_CHUNK):
            body = {"side": side, "rows": closing[at : at + RESOLVE_CHUNK], "reason": "timing"}
            url = f"/api/v2/reconciliations/{created['id']}/resolutions"
            status, answer = api(server, "POST", url, who, json.dumps(body).encode())
            if status != 201:
                raise RuntimeError(f"a resolution answered {status}: {answer}")
    return {sides[s]: len(open_positions(client, created["id"], s, n)) for s, n in sides.items()}


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
            created = reconciled_pair(cfg, home, who, folder, definition, rec, admin_log)
            env = {**home.env, "TALLY_SERVE_WORKER": "false"}
            server = tt.start_server(cfg, env, home.db_pids)
            client = signed_in_user(env, server.base_url, str(who["workspace_id"]), "analyst")
            try:
                for mode in OPEN_MODES:
                    found: dict[str, Any] = {"load_before": os.getloadavg()}
                    if mode != "run":
                        log(f"{backend}: resolving all but {mode} open rows")
                        started = time.perf_counter()
                        found["open"] = leave_open(server, client, who, created, int(mode))
                        found["resolve_s"] = round(time.perf_counter() - started, 1)
                    found.update(measure(client, created["id"]))
                    found["load_after"] = os.getloadavg()
                    rec[f"open: {mode}"] = found
            finally:
                client.close()
                stop(server.proc)
        rec["load_after"] = os.getloadavg()
        records.append(rec)
        log(json.dumps(rec, default=str))
    (cfg.results / "workbench.json").write_text(json.dumps(records, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
