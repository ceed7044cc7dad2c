#!/usr/bin/env python3
"""Transformations (issue #12) on tally's backends, beside the same SQL in DuckDB and
the same operations in pandas (transform_peers.py), on the kit's 1M-row payments CSV
and its 1M pair.

    flock /tmp/quiet.lock .venv/bin/python bench/transform.py     # 1M rows, both backends
    BENCH_ROWS=200000 BENCH_TRANSFORM_PAIR_ROWS=100000 .venv/bin/python bench/transform.py

The transformations (transform_queries.py): (a) settled payments with `amount - fee AS
net`, (b) SUM(amount) and COUNT(*) per counterparty, currency and month, (c) the pair's
ledger LEFT JOIN its bank by reference. One backend, start to finish, only through
tally's CLI and HTTP API (plus a read-only look at the outputs' tables for checksums):

1. a fresh home (PostgreSQL: a throwaway cluster with default durability); `tally admin
   load` of the payments CSV (`t`), bank.csv (`b`) and ledger.csv (`l`);
2. `tally serve` until its worker has stored the sources' row JSON and built their
   indexes (as it does after any load), then stopped;
3. `tally admin create-transformation` of (a), (b), (c); no worker runs, so their first
   runs wait for the trigger;
4. `tally serve` without its worker (TALLY_SERVE_WORKER=false: the Data API only), and
   for each transformation `tally admin run-transformation`, timed from the command's
   start: until the Data API first answers the output's first page with rows
   (`readable_s`, polled every 50 ms), until the command returned (`wall_s`: it also
   stores the rows' JSON text, indexes the output and drops the table it replaced), the run's own
   started_at..finished_at, CPU, peak RSS, PostgreSQL's CPU; the load average beside;
5. the outputs' checksums (row count, exact sums) from their tables;
6. `tally serve` with its worker; a file of BENCH_TRANSFORM_LATE (10,000) new payments
   (the kit's generator, seed + 1, ids after the CSV's) uploaded to `t` (`feed-source`),
   timed until (a)'s first page reports the new rows; (a)'s run (mode, own times); once
   with TALLY_DERIVED_BURST_SECONDS at tally's default and once at 0 (another file).

Then the peers on the same CSVs (transform_peers.py with the kit's venv: DuckDB, pandas)
and the checksums compared. Results: BENCH_RESULTS (default bench/results/transform-<UTC
time>/): `transform.json`, `transform.md`, `logs/`.
"""

from __future__ import annotations

import csv
import datetime as dt
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests")]

import procs  # noqa: E402
import run  # noqa: E402
import tally_target as tt  # noqa: E402
import transform_report  # noqa: E402
from derived_bench import (  # noqa: E402
    api,
    delivered_after,
    feed,
    load_sources,
    output_columns,
    pair_dir,
    tenant,
    timed_run,
)
from procs import log  # noqa: E402
from tally_target import Home, fresh_home  # noqa: E402
from transform_queries import QUERIES, checksum, checksum_sql  # noqa: E402

PEER_TIMEOUT_SECONDS = 1800
LATE_TIMEOUT_SECONDS = 300
BURSTS = (None, "0")  # TALLY_DERIVED_BURST_SECONDS for each late file: default, then 0


def settings(cfg: run.Config) -> dict[str, Any]:
    env = os.environ.get
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return {
        "rows": cfg.rows,
        "pair_rows": int(env("BENCH_TRANSFORM_PAIR_ROWS", "1000000")),
        "seed": cfg.seed,
        "late": int(env("BENCH_TRANSFORM_LATE", "10000")),
        "peers": [p for p in env("BENCH_TRANSFORM_PEERS", "duckdb,pandas").split(",") if p],
        "results": Path(
            env("BENCH_RESULTS", str(REPO / "bench" / "results" / f"transform-{stamp}"))
        ),
    }


# --- the files ------------------------------------------------------------------------------


def late_files(cfg: run.Config, opts: dict[str, Any], into: Path) -> list[tuple[Path, int]]:
    """One file of `late` new payments per burst setting: the kit's generator at seed + 1
    (cached in BENCH_WORK), ids renumbered after the CSV's; with the settled rows of each."""
    count, seed = opts["late"] * len(BURSTS), opts["seed"] + 1
    source = cfg.work / f"transactions_{count}_s{seed}.csv"
    if not source.exists():
        gen = [sys.executable, str(cfg.kit / "gen_transactions.py"), "--rows", str(count)]
        subprocess.run([*gen, "--seed", str(seed), "--out", str(source)], check=True)
    with open(source, newline="") as f:
        reader = csv.reader(f)
        header, rows = next(reader), list(reader)
    status = header.index("status")
    files = []
    for n in range(len(BURSTS)):
        path = into / f"late_{n}.csv"
        part = rows[n * opts["late"] : (n + 1) * opts["late"]]
        with open(path, "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            for i, row in enumerate(part):
                writer.writerow([str(opts["rows"] + n * opts["late"] + i + 1), *row[1:]])
        files.append((path, sum(1 for row in part if row[status] == "settled")))
    return files


# --- tally ------------------------------------------------------------------------------


class FirstPage(threading.Thread):
    """Asks the Data API for a resource's first page every 50 ms until its total_count
    passes `enough`: `seen_at` is when that answer came, from `t0`."""

    def __init__(
        self,
        server: tt.Server,
        who: dict[str, Any],
        resource_id: int,
        enough: Callable[[int], bool],
    ):
        super().__init__(daemon=True)
        self.path = f"/api/v1/resources/{resource_id}/data?page_size=1"
        self.headers = {"X-API-Key": who["key"], "workspace_id": str(who["workspace_id"])}
        self.port, self.enough = server.port, enough
        self.t0 = time.perf_counter()
        self.seen_at: float | None = None
        self.total: int | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self.stop.is_set():
            try:
                status, body, _ = tt._get(conn, self.path, self.headers)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                status, body = 0, b""
            if status == 200:
                total = int(json.loads(body)["meta"]["total_count"])
                if self.enough(total):
                    self.seen_at, self.total = time.perf_counter() - self.t0, total
                    break
            self.stop.wait(tt.POLL_SECONDS)
        conn.close()

    def wait(self, timeout: float) -> float:
        self.join(timeout)
        self.stop.set()
        if self.seen_at is None:
            raise RuntimeError(f"{self.path} did not show the rows within {timeout:g} s")
        return round(self.seen_at, 3)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed_runs(
    cfg: run.Config, home: Home, who: dict[str, Any], created: dict[str, Any]
) -> dict[str, Any]:
    """Each transformation's first run, triggered by `tally admin run-transformation`,
    with the Data API (no worker) answering meanwhile."""
    env = {**home.env, "TALLY_SERVE_WORKER": "false"}
    server = tt.start_server(cfg, env, home.db_pids)
    runs = {}
    try:
        for key, made in created.items():
            log(f"{home.backend}: tally admin run-transformation ({key})")
            watch = FirstPage(server, who, made["resource_id"], lambda total: total > 0)
            before = loadavg()
            watch.t0 = time.perf_counter()
            watch.start()
            run_log = cfg.logs / f"tally-{home.backend}-run.log"
            record = timed_run(home, "run-transformation", made["id"], run_log)
            record["readable_s"] = watch.wait(60)
            record["rows"] = watch.total
            record["loadavg_before"], record["loadavg_after"] = before, loadavg()
            runs[key] = record
            log(f"{home.backend}: ({key}) readable after {record['readable_s']} s, "
                f"command {record['wall_s']} s")  # fmt: skip
    finally:
        procs.stop(server.proc)
    return runs


def checksums(home: Home, created: dict[str, Any]) -> dict[str, Any]:
    """Each output's checksum from its table (SQLite keeps decimals as scaled integers)."""
    out = {}
    for key, made in created.items():
        query = QUERIES[key]
        conn, columns = output_columns(home.path, home.url, made["resource_id"])
        physical = {name: c["physical"] for name, c in columns.items()}
        row = conn.execute(
            checksum_sql(query, f"r_{int(made['resource_id'])}", physical)
        ).fetchone()
        conn.close()
        sums = list(row[1 : 1 + len(query["sums"])])
        if home.url is None:
            sums = [
                Decimal(v or 0).scaleb(-int(columns[name].get("scale", 0)))
                for name, v in zip(query["sums"], sums, strict=True)
            ]
        out[key] = checksum(query, row[0], sums, list(row[1 + len(query["sums"]) :]))
    return out


def late_runs(
    cfg: run.Config, home: Home, who: dict[str, Any], made: dict[str, Any], source_id: int,
    files: list[tuple[Path, int]],
) -> list[dict[str, Any]]:  # fmt: skip
    """Each late file uploaded to (a)'s input with the worker running: seconds until (a)'s
    first page reports its settled rows."""
    out = []
    for burst, (path, settled) in zip(BURSTS, files, strict=True):
        env = dict(home.env)
        if burst is not None:
            env["TALLY_DERIVED_BURST_SECONDS"] = burst
        started = time.perf_counter()
        server = tt.start_server(cfg, env, home.db_pids)
        try:
            tt.wait_for_indexes(home.path, home.url, started)
            _, before = api(server, "GET", f"/api/v2/transformations/{made['id']}", who)
            rows = before["last_run"]["rows"]
            log(f"{home.backend}: a late file of {path.stat().st_size:,} bytes, burst {burst}")
            watch = FirstPage(server, who, made["resource_id"], lambda t: t >= rows + settled)  # noqa: B023
            load = loadavg()
            uploaded = dt.datetime.now(dt.UTC)
            watch.t0 = time.perf_counter()
            watch.start()
            feed(server, who, source_id, path)
            accepted = time.perf_counter() - watch.t0
            seconds = watch.wait(LATE_TIMEOUT_SECONDS)
            last_run = settled_run(server, who, made["id"], before["last_run"])
            started = dt.datetime.fromisoformat(last_run["started_at"]) - uploaded
            delivered = delivered_after(server, who, source_id) - uploaded
            record = {
                "burst_s": burst or "default",
                "new_rows": settled,
                "accepted_s": round(accepted, 3),
                "run_started_s": round(started.total_seconds(), 3),
                "delivered_s": round(delivered.total_seconds(), 3),
                "run_s": run_seconds(last_run),
                "seconds": seconds,
                "rows": watch.total,
                "loadavg": load,
                "last_run": last_run,
            }
            out.append(record)
            log(f"{home.backend}: (a) showed the new rows after {seconds} s")
            idle(server, who)
        finally:
            procs.stop(server.proc)
    return out


def settled_run(
    server: tt.Server, who: dict[str, Any], derived_id: int, before: dict[str, Any]
) -> dict[str, Any]:
    """The last run of the transformation once a run after `before` has ended."""
    deadline = time.monotonic() + LATE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        _, now = api(server, "GET", f"/api/v2/transformations/{derived_id}", who)
        last = now.get("last_run") or {}
        if last.get("started_at") != before["started_at"] and now["state"] in ("idle", "queued"):
            return dict(last)
        if now["state"] == "failed":
            raise RuntimeError(f"the run failed: {now.get('error')}")
        time.sleep(tt.POLL_SECONDS)
    raise RuntimeError("the refresh did not end in time")


def idle(server: tt.Server, who: dict[str, Any]) -> None:
    """Waits until no transformation of the workspace is queued or running (the other
    readers of the input refresh too), so the next measure starts quiet."""
    deadline = time.monotonic() + LATE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        _, listed = api(server, "GET", "/api/v2/transformations", who)
        if all(t["state"] in ("idle", "failed") for t in listed["data"]):
            return
        time.sleep(tt.POLL_SECONDS)
    raise RuntimeError("the transformations did not settle in time")


def run_seconds(last_run: dict[str, Any]) -> float:
    started = dt.datetime.fromisoformat(last_run["started_at"])
    return round((dt.datetime.fromisoformat(last_run["finished_at"]) - started).total_seconds(), 3)


def backend_run(cfg: run.Config, opts: dict[str, Any], backend: str, pair: Path) -> dict[str, Any]:
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}"}
    try:
        with fresh_home(cfg, backend, rec, "transform") as home:
            _measure(cfg, opts, rec, home, pair)
    except Exception as error:  # recorded; the other targets still run
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    return rec


def _measure(
    cfg: run.Config, opts: dict[str, Any], rec: dict[str, Any], home: Home, pair: Path
) -> None:
    admin_log = cfg.logs / f"tally-{home.backend}-admin.log"
    who = tenant(home.env, admin_log)
    files = {"t": cfg.csv, "b": pair / "bank.csv", "l": pair / "ledger.csv"}
    loads = rec["loads"] = load_sources(cfg, home, who, files, rec)
    started = time.perf_counter()
    server = tt.start_server(cfg, home.env, home.db_pids)
    try:
        rec["sources_indexed"] = tt.wait_for_indexes(home.path, home.url, started)
    finally:
        procs.stop(server.proc)
    created = {}
    for key, query in QUERIES.items():
        spec = home.path / f"{key}.json"
        inputs = {name: loads[name]["resource_id"] for name in query["inputs"]}
        spec.write_text(json.dumps({"name": query["name"], "inputs": inputs, "sql": query["sql"]}))
        args = ["admin", "create-transformation", "--workspace", str(who["workspace_id"])]
        created[key] = tt.tally_cli([*args, "--file", str(spec)], home.env, admin_log)
    rec["created"] = created
    rec["runs"] = timed_runs(cfg, home, who, created)
    rec["checksums"] = checksums(home, created)
    late = late_files(cfg, opts, home.path)
    rec["late"] = late_runs(cfg, home, who, created["a"], loads["t"]["resource_id"], late)


def peers(cfg: run.Config, opts: dict[str, Any], pair: Path) -> list[dict[str, Any]]:
    out = []
    for engine in opts["peers"]:
        log(f"peers: transform_peers.py --engine {engine}")
        cmd = [str(cfg.venv / "bin" / "python"), str(REPO / "bench" / "transform_peers.py")]
        cmd += ["--engine", engine, "--payments", str(cfg.csv), "--pair", str(pair)]
        load = loadavg()
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=PEER_TIMEOUT_SECONDS, check=False
        )
        (cfg.logs / f"transform_peers-{engine}.log").write_text(done.stderr + done.stdout)
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                out.append({**json.loads(line), "loadavg": load})
        if done.returncode != 0:
            out.append({"engine": engine, "error": f"exited {done.returncode}; see logs"})
    return out


def main() -> int:
    cfg = run.load_config()
    opts = settings(cfg)
    cfg.results = opts["results"].resolve()
    cfg.logs.mkdir(parents=True, exist_ok=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, procs.raise_on_signal)
    records, peer_records = [], []
    facts = {"machine": run.machine(), "versions": run.versions(), "settings": opts}
    try:
        run.kit_step(cfg, "setup", "gen")
        pair = pair_dir(cfg, opts["pair_rows"], opts["seed"])
        for backend in cfg.backends:
            records.append(backend_run(cfg, opts, backend, pair))
        peer_records = peers(cfg, opts, pair)
    finally:
        procs.stop_everything()
    everything = {"records": records, "peers": peer_records, **facts}
    (cfg.results / "transform.json").write_text(json.dumps(everything, indent=1, default=str))
    text = transform_report.report(records, peer_records, facts)
    (cfg.results / "transform.md").write_text(text)
    print(text)
    return 0 if all("error" not in r for r in records + peer_records) else 1


if __name__ == "__main__":
    sys.exit(main())
