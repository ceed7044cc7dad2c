#!/usr/bin/env python3
"""The query mix (issue #14, point 5) on tally's backends and, where they can answer
it, its peers: `query_mix_driver.py` against each target, one after another, on the
same CSV, with the same seeded stream of queries.

    .venv/bin/python bench/query_mix.py                       # 1M rows, sqlite+postgresql
    BENCH_ROWS=200000 BENCH_MIX_DURATION=10 .venv/bin/python bench/query_mix.py
    BENCH_MIX_PEERS=datasette,roapi .venv/bin/python bench/query_mix.py   # + the peers
    BENCH_MIX_HOLD=sqlite .venv/bin/python bench/query_mix.py  # set up, print, wait

tally is set up as `bench/run.sh` sets it up (`tally_target.py`): a fresh home (and
throwaway PostgreSQL cluster with default durability), `tally admin load` of the CSV,
`VACUUM (ANALYZE)` on PostgreSQL, `tally serve` with `TALLY_RESPONSE_CACHE=false`, and
a wait until its worker has built the indexes. Datasette serves the kit's indexed
SQLite file (`run_peers.sh load-sqlite index-sqlite`, made when missing), ROAPI the
CSV, both on 127.0.0.1. `BENCH_MIX_HOLD=<backend>` stops after the set-up, prints how
to reach the server (for profiling) and waits for Ctrl-C.

Results: BENCH_RESULTS (default bench/results/mix-<UTC time>/): `mix-<label>.json`
and `.md` per target, `mix.md` side by side, `logs/`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests")]

import procs  # noqa: E402
import run  # noqa: E402
import tally_target as tt  # noqa: E402
from procs import log  # noqa: E402

PEER_START_SECONDS = 300
DRIVER_TIMEOUT_SECONDS = 1800
HOLD_SECONDS = 3600


def settings() -> dict[str, Any]:
    env = os.environ.get
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return {
        "duration": float(env("BENCH_MIX_DURATION", "30")),
        # long enough for each query process to build a 1M-row column snapshot while
        # the warm-up's requests are answered by SQL (9-17 s each here; decision 0014)
        "warmup": float(env("BENCH_MIX_WARMUP", "60")),
        "seed": int(env("BENCH_MIX_SEED", "14")),
        "peers": [p for p in env("BENCH_MIX_PEERS", "").split(",") if p],
        "hold": env("BENCH_MIX_HOLD", ""),
        "results": Path(env("BENCH_RESULTS", str(REPO / "bench" / "results" / f"mix-{stamp}"))),
    }


def driver_cmd(cfg: run.Config, mix: dict[str, Any], label: str, pids: list[int]) -> list[str]:
    cmd = [str(cfg.venv / "bin" / "python"), str(REPO / "bench" / "query_mix_driver.py")]
    cmd += ["--csv", str(cfg.csv), "--seed", str(mix["seed"]), "--label", label]
    cmd += ["--duration", f"{mix['duration']:g}", "--warmup", f"{mix['warmup']:g}"]
    cmd += ["--concurrency", str(cfg.concurrency), "--out", str(cfg.results / f"mix-{label}")]
    for pid in pids:
        cmd += ["--server-pid", str(pid)]
    return cmd


def drive(cfg: run.Config, cmd: list[str], label: str) -> int:
    log(f"mix: {label}")
    proc = procs.spawn(
        cmd,
        env={**cfg.kit_env(), "BENCH_KIT": str(cfg.kit)},
        cwd=REPO,
        stdout=cfg.logs / f"mix-{label}.out",
        log_path=cfg.logs / f"mix-{label}.log",
    )
    return procs.wait(proc, DRIVER_TIMEOUT_SECONDS)


def hold(server: tt.Server, env: dict[str, str], tenant: dict[str, Any], resource_id: int) -> None:
    print(
        json.dumps(
            {
                "home": env["TALLY_HOME"],
                "database_url": env.get("TALLY_DATABASE_URL"),
                "base_url": server.base_url,
                "pids": server.pids,
                "api_key": tenant["key"],
                "workspace_id": tenant["workspace_id"],
                "resource_id": resource_id,
            }
        ),
        flush=True,
    )
    log(f"holding the server for {HOLD_SECONDS} s; Ctrl-C (or SIGTERM) ends it sooner")
    time.sleep(HOLD_SECONDS)


def tally_backend(cfg: run.Config, mix: dict[str, Any], backend: str) -> dict[str, Any]:
    """A fresh tally on `backend`, loaded and indexed as bench/run.sh does, then the mix."""
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}"}
    try:
        with tt.fresh_home(cfg, backend, rec, "mix") as fresh:
            _measure(cfg, mix, backend, fresh, rec)
    except Exception as error:  # recorded; the other targets still run
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    return rec


def _measure(
    cfg: run.Config, mix: dict[str, Any], backend: str, fresh: tt.Home, rec: dict[str, Any]
) -> None:
    """Load and index the rows, then the mix (or hold the server, when asked)."""
    env, home, db_pids = fresh.env, fresh.path, fresh.db_pids
    tenant = tt.loaded_tenant(cfg, fresh, rec)
    started = time.perf_counter()
    server = tt.start_server(cfg, env, db_pids)
    try:
        rec["worker_indexes"] = tt.wait_for_indexes(home, env.get("TALLY_DATABASE_URL"), started)
        log(f"{backend}: indexes built {rec['worker_indexes']}")
        resource_id = rec["load"]["resource_id"]
        if mix["hold"] == backend:
            hold(server, env, tenant, resource_id)
            return
        cmd = driver_cmd(cfg, mix, rec["label"], server.pids)
        cmd += ["--target", "tally", "--base-url", server.base_url, "--api-key", tenant["key"]]
        cmd += ["--workspace-id", str(tenant["workspace_id"])]
        cmd += ["--resource-id", str(resource_id), "--note", "TALLY_RESPONSE_CACHE=false"]
        rec["driver_exit"] = drive(cfg, cmd, rec["label"])
    finally:
        procs.stop(server.proc)


def wait_http(url: str, proc: Any) -> None:
    import urllib.request

    deadline = time.monotonic() + PEER_START_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer")


def peer(cfg: run.Config, mix: dict[str, Any], name: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"label": name}
    port = procs.free_port()
    base = f"http://127.0.0.1:{port}"
    bin_dir = cfg.venv / "bin"
    if name == "datasette":
        db = cfg.work / f"sqlite-idx-{cfg.rows}-s{cfg.seed}" / "transactions.db"
        if not db.exists():
            run.kit_step(cfg, "load-sqlite", "index-sqlite")
        cmd = [str(bin_dir / "datasette"), "serve", "-i", str(db), "-h", "127.0.0.1"]
        cmd += ["-p", str(port), "--setting", "max_returned_rows", "10000"]
        cmd += ["--setting", "sql_time_limit_ms", "60000", "--setting", "suggest_facets", "off"]
        ready, target = f"{base}/-/versions.json", ["--target", "datasette"]
    else:
        cmd = [str(bin_dir / "roapi"), "-a", f"127.0.0.1:{port}"]
        cmd += ["-p", f"127.0.0.1:{procs.free_port()}"]
        cmd += ["--addr-flight-sql", f"127.0.0.1:{procs.free_port()}"]
        cmd += ["-t", f"transactions={cfg.csv}"]
        ready, target = f"{base}/api/tables/transactions?limit=1", ["--target", "roapi"]
    # ROAPI reads HOST and PORT as defaults: nothing may widen its binding.
    env = {k: v for k, v in cfg.kit_env().items() if k not in ("HOST", "PORT")}
    server = procs.spawn(cmd, env=env, cwd=REPO, log_path=cfg.logs / f"{name}.log")
    try:
        wait_http(ready, server)
        cmd = driver_cmd(cfg, mix, name, [server.pid]) + target + ["--base-url", base]
        rec["driver_exit"] = drive(cfg, cmd, name)
    except Exception as error:
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{name}: FAILED {rec['error']}")
    finally:
        procs.stop(server)
    return rec


def side_by_side(folder: Path, labels: list[str]) -> str:
    lines = [
        "| target | requests | req/s | p50 ms | p95 ms | p99 ms | max ms | checks | "
        "server CPU ms/req | load avg (start) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label in labels:
        path = folder / f"mix-{label}.json"
        if not path.exists():
            lines.append(f"| {label} | (no result) |||||||||")
            continue
        res = json.loads(path.read_text())
        s, lat = res["summary"], res["summary"]["latency_ms"]
        lines.append(
            f"| {label} | {s['requests']} | {s['rps']} | {lat['p50']} | {lat['p95']} | "
            f"{lat['p99']} | {lat['max']} | {s['checks']} | "
            f"{s.get('server_cpu_ms_per_request')} | {res['settings']['loadavg_at_start']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    cfg = run.load_config()
    mix = settings()
    cfg.results = mix["results"].resolve()
    cfg.logs.mkdir(parents=True, exist_ok=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, procs.raise_on_signal)
    records = []
    try:
        run.kit_step(cfg, "setup", "gen")
        for backend in cfg.backends:
            records.append(tally_backend(cfg, mix, backend))
        for name in mix["peers"]:
            records.append(peer(cfg, mix, name))
    finally:
        procs.stop_everything()
    labels = [r["label"] for r in records]
    (cfg.results / "mix-run.json").write_text(json.dumps(records, indent=1, default=str))
    table = side_by_side(cfg.results, labels)
    (cfg.results / "mix.md").write_text(table)
    print(table)
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
