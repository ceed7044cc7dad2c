"""What the benchmarks of derived resources share (reconcile.py, transform.py): the kit's
pair, a fresh home on either backend, a tenant made through the CLI, timed loads, a
timed `tally admin run-...`, the /api/v2 client, an upload to a source, a catalogue look
at an output's columns, markdown tables."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import procs
import run
import tally_target as tt
from durable_pg import vacuum
from procs import log
from tally_target import Home

REPO = Path(__file__).resolve().parent.parent


def pair_dir(cfg: run.Config, rows: int, seed: int) -> Path:
    """The kit's `gen_transactions.py --pair` folder (bank.csv, ledger.csv, truth.csv),
    generated into BENCH_WORK when absent."""
    folder = cfg.work / f"pair_{rows}_s{seed}"
    if not (folder / "truth.csv").exists():
        log(f"generating the pair: {rows:,} bank rows, seed {seed}")
        gen = cfg.kit / "gen_transactions.py"
        cmd = [sys.executable, str(gen), "--pair", "--rows", str(rows), "--seed", str(seed)]
        subprocess.run([*cmd, "--out", str(folder)], check=True, capture_output=True)
    return folder


def load_sources(
    cfg: run.Config, home: Home, who: dict[str, Any], files: dict[str, Path], rec: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """`tally admin load` of each file as a source named after its key, timed
    (tally_target.timed_load); on PostgreSQL then `VACUUM (ANALYZE)`, as autovacuum would
    soon after, timed in `rec["vacuum_s"]`."""
    loads = {}
    for name, path in files.items():
        log(f"{home.backend}: tally admin load {name}")
        loads[name] = tt.timed_load(
            cfg,
            home.env,
            home=home.path,
            workspace=who["workspace_id"],
            name=name,
            csv=path,
            db_pids=home.db_pids,
        )
    if home.url is not None:
        rec["vacuum_s"] = vacuum(home.url)
    return loads


def reconciled_pair(
    cfg: run.Config,
    home: Home,
    who: dict[str, Any],
    folder: Path,
    spec: Callable[[int, int], dict[str, Any]],
    rec: dict[str, Any],
    log_path: Path,
) -> dict[str, Any]:
    """The pair's bank.csv and ledger.csv loaded (load_sources), a reconciliation of them
    created with `spec(bank_id, ledger_id)` (reconcile.py's `definition`) and its first
    run timed in `rec["run"]` (timed_run): what the workbench's benches start from. The
    created reconciliation (`id`, `resource_id`: its output)."""
    files = {"bank": folder / "bank.csv", "ledger": folder / "ledger.csv"}
    loads = load_sources(cfg, home, who, files, rec)
    path = home.path / "recon.json"
    path.write_text(json.dumps(spec(loads["bank"]["resource_id"], loads["ledger"]["resource_id"])))
    args = ["admin", "create-reconciliation", "--workspace", str(who["workspace_id"])]
    created: dict[str, Any] = tt.tally_cli([*args, "--file", str(path)], home.env, log_path)
    log(f"{home.backend}: run-reconciliation")
    rec["run"] = timed_run(home, "run-reconciliation", created["id"], log_path)
    return created


def tenant(env: dict[str, str], log_path: Path) -> dict[str, Any]:
    """An account, a workspace with ingestion on (uploads to its sources) and a key."""
    account = tt.tally_cli(["admin", "create-account", "--name", "bench"], env, log_path)
    args = ["admin", "create-workspace", "--account", str(account["id"]), "--name", "bench"]
    workspace = tt.tally_cli([*args, "--ingestion"], env, log_path)
    key = tt.tally_cli(["admin", "create-key", "--workspace", str(workspace["id"])], env, log_path)
    return {"key": key["key"], "workspace_id": workspace["id"], "account_id": account["id"]}


def timed_run(home: Home, command: str, derived_id: int, log_path: Path) -> dict[str, Any]:
    """`tally admin <command> --id ID` (run-reconciliation, run-transformation): wall time
    (process start-up included), the run's own started_at..finished_at, CPU, peak RSS,
    the PostgreSQL server's CPU."""
    out = home.path / f"{command}-{derived_id}.json"
    cmd = [str(tt.TALLY), "admin", command, "--id", str(derived_id)]
    db_cpu0 = procs.tree_cpu_seconds(home.db_pids)
    t0 = time.perf_counter()
    proc = procs.spawn(cmd, env=home.env, cwd=REPO, stdout=out, log_path=log_path)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    procs.forget(proc)
    db_cpu = procs.tree_cpu_seconds(home.db_pids) - db_cpu0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{command} failed: {out.read_text()[-500:]}")
    last_run = json.loads(out.read_text().strip().splitlines()[-1])
    started = dt.datetime.fromisoformat(last_run["started_at"])
    finished = dt.datetime.fromisoformat(last_run["finished_at"])
    return {
        "wall_s": round(seconds, 3),
        "run_s": round((finished - started).total_seconds(), 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "db_server_cpu_s": round(db_cpu, 3) if home.db_pids else None,
        "last_run": last_run,
    }


def api(
    server: tt.Server,
    method: str,
    path: str,
    who: dict[str, Any],
    body: bytes = b"",
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """One /api/v2 request with the three headers; (status, parsed body)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    headers = {
        "X-API-Key": who["key"],
        "X-Svc-Workspace": str(who["workspace_id"]),
        "X-Svc-Account": str(who["account_id"]),
        "Content-Type": content_type,
    }
    conn.request(method, path, body=body or None, headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, json.loads(data) if data else None


def feed(server: tt.Server, who: dict[str, Any], source_id: int, csv: Path) -> None:
    """Upload `csv` to the source (`feed-source`): its rows are appended by a worker."""
    path = f"/api/v2/sources/{source_id}/feed-source"
    status, accepted = api(server, "POST", path, who, csv.read_bytes(), "text/csv")
    if status != 202:
        raise RuntimeError(f"upload answered {status}: {accepted}")


def delivered_after(server: tt.Server, who: dict[str, Any], source_id: int) -> dt.datetime:
    """When the source's newest file became `delivered` (its rows readable): the input's
    change that the refresh answers."""
    newest: dict[str, Any] | None = None
    after = 0
    while True:  # the files API pages oldest first
        _, page = api(server, "GET", f"/api/v2/sources/{source_id}/files?after={after}", who)
        if not page["data"]:
            break
        newest = page["data"][-1]
        after = newest["id"]
    if newest is None or newest["status"] != "delivered":
        raise RuntimeError(f"the late file was not delivered: {newest}")
    return dt.datetime.fromisoformat(newest["finished_at"])


def output_columns(
    home: Path, url: str | None, resource_id: int
) -> tuple[Any, dict[str, dict[str, Any]]]:
    """A read-only catalogue connection and the resource's columns by name, as the
    catalogue keeps them: `physical` (c0..cN in its table `r_<id>`), `type`, `scale`."""
    conn = tt.catalogue_connection(home, url)
    cur = conn.execute(f"SELECT columns FROM resources WHERE id = {int(resource_id)}")
    columns = cur.fetchone()[0]
    columns = json.loads(columns) if isinstance(columns, str) else columns
    return conn, {c["name"]: c for c in columns}


def md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    def line(cells: list[Any]) -> str:
        return "| " + " | ".join("" if c is None else str(c) for c in cells) + " |"

    return [line(header), line(["---"] + ["---:"] * (len(header) - 1)), *map(line, rows), ""]
