#!/usr/bin/env python3
"""What `tally serve`'s memory is made of under the Data API benchmark's load (issue #36):
each process's peak, split into its own memory and the file pages and shared memory
that RSS also counts.

    .venv/bin/python bench/serve_memory.py                          # 1M rows, both backends
    BENCH_BACKENDS=sqlite BENCH_MEMORY_QUERIES=Q1,Q3 .venv/bin/python bench/serve_memory.py
    BENCH_MEMORY_TALLY_ENV="MALLOC_ARENA_MAX=2 TALLY_SNAPSHOT_MEMORY_MB=0" .venv/bin/python ...

tally is set up as `bench/run.sh` sets it up (`tally_target.py`: a fresh home and
PostgreSQL cluster, `tally admin load` of the kit's CSV, `VACUUM (ANALYZE)`, `tally serve`
with the response cache off, the worker's indexes waited for), then the kit's driver runs
each query of BENCH_MEMORY_QUERIES (default Q1-Q5) at BENCH_CONCURRENCY for
BENCH_DURATION seconds. From `tally serve`'s start a thread reads every process of the
server (and of the PostgreSQL cluster) from /proc every BENCH_MEMORY_SAMPLE_SECONDS
(0.2): `status` (RssAnon, RssFile, RssShmem, VmHWM) and `smaps_rollup` (Pss, the
process's share of every page it maps). Each process is named by its role: the API
process (with `tally serve`'s own worker), a query process, multiprocessing's resource
tracker, PostgreSQL's helpers, and each backend by the tally process at the other end
of its connection (its client port), so each process's backends can be counted.

Why two sums: the kit's driver reports the sum of every process's VmHWM, which counts a
page mapped by several processes once in each (SQLite's memory-mapped database in every
query process, PostgreSQL's shared buffers in every backend), and file pages, which the
kernel can drop and read again. "Heap" here is RssAnon: memory only that process holds.

BENCH_MEMORY_TALLY_ENV adds environment variables to tally's processes (space-separated
NAME=value), to compare settings in the same conditions. Results: BENCH_RESULTS (default
bench/results/memory-<UTC time>/) `memory-<label>.json` and `memory.md`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests")]

import procs  # noqa: E402
import run  # noqa: E402
import tally_target as tt  # noqa: E402
from procs import log  # noqa: E402
from tally_target import Home, fresh_home  # noqa: E402

STATUS_FIELDS = ("RssAnon", "RssFile", "RssShmem", "VmHWM")
ROLLUP_FIELDS = ("Pss", "Private_Dirty", "Private_Clean")
UNKNOWN_CLIENT = "another client"  # not (or not yet) seen among tally's processes


def settings() -> dict[str, Any]:
    env = os.environ.get
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    extra = dict(item.split("=", 1) for item in shlex.split(env("BENCH_MEMORY_TALLY_ENV", "")))
    return {
        "queries": env("BENCH_MEMORY_QUERIES", "Q1,Q2,Q3,Q4,Q5").split(","),
        "sample_seconds": float(env("BENCH_MEMORY_SAMPLE_SECONDS", "0.2")),
        "tally_env": extra,
        "results": Path(env("BENCH_RESULTS", str(REPO / "bench" / "results" / f"memory-{stamp}"))),
    }


# --- reading /proc ---------------------------------------------------------------------


def read_kib(path: str, names: tuple[str, ...]) -> dict[str, int]:
    """The `names: N kB` lines of a /proc file (status, smaps_rollup)."""
    out: dict[str, int] = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in names:
                out[key] = int(value.split()[0])
    return out


def role(pid: int, api_pid: int, clients: dict[int, str] | None = None) -> str:
    """What a process of the server or of the cluster is, from its command line; a
    PostgreSQL backend is named by the process at the other end of its connection
    (`clients`: local TCP port -> role), so each tally process's backends are counted."""
    if pid == api_pid:
        return "API process (+ its worker)"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    if "resource_tracker" in text:
        return "resource tracker"
    if "multiprocessing" in text:
        return "query process"
    if text.startswith("postgres:"):
        title = text.removeprefix("postgres:").strip()
        # a client backend's title is "user database host(port) state"
        if "(" not in title:
            return f"postgres {title.split()[0]}"
        port = int(title.split("(", 1)[1].split(")", 1)[0])
        return f"postgres backend of {(clients or {}).get(port, UNKNOWN_CLIENT)}"
    if "postgres" in text:
        return "postmaster"
    return text[:60]


def tcp_ports_by_inode() -> dict[int, int]:
    """Socket inode -> local port of every TCP socket on the machine (/proc/net/tcp*)."""
    out: dict[int, int] = {}
    for name in ("tcp", "tcp6"):
        with open(f"/proc/net/{name}") as f:
            next(f)
            for line in f:
                fields = line.split()
                out[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return out


def client_ports(roles: dict[int, str]) -> dict[int, str]:
    """Local TCP port -> the role of the tally process holding that socket."""
    inodes = tcp_ports_by_inode()
    out: dict[int, str] = {}
    for pid, name in roles.items():
        if name.startswith("post"):
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and (inode := int(target[8:-1])) in inodes:
                out[inodes[inode]] = f"{name} {pid}"
    return out


@dataclass
class Peak:
    """One process's highest figure of each kind, KiB (each maybe at another moment)."""

    role: str
    kib: dict[str, int] = field(default_factory=dict)

    def update(self, sample: dict[str, int]) -> None:
        for key, value in sample.items():
            self.kib[key] = max(self.kib.get(key, 0), value)


class MemoryWatch(threading.Thread):
    """Samples every process of the server's and the cluster's trees; keeps each one's
    peaks and, per phase, the peak of the sums over all of them (at one moment)."""

    def __init__(self, api_pid: int, db_pids: list[int], interval: float) -> None:
        super().__init__(daemon=True)
        self.api_pid, self.db_pids, self.interval = api_pid, db_pids, interval
        self.peaks: dict[int, Peak] = {}
        self.phase = "start"
        self.phase_sums: dict[str, dict[str, int]] = {}
        self.phase_heaps: dict[str, dict[int, int]] = {}  # each process's RssAnon peak
        self._roles: dict[int, str] = {}
        self._done = threading.Event()

    def sample_once(self) -> None:
        table = procs._process_table()
        sums = {"tally_anon": 0, "tally_pss": 0, "tally_rss": 0, "db_anon": 0, "db_pss": 0}
        for pid in procs._tree([self.api_pid, *self.db_pids], table):
            try:
                sample = read_kib(f"/proc/{pid}/status", STATUS_FIELDS)
                sample |= read_kib(f"/proc/{pid}/smaps_rollup", ROLLUP_FIELDS)
            except (OSError, ValueError):
                continue
            if pid not in self._roles or self._roles[pid].endswith(UNKNOWN_CLIENT):
                # a backend's client may not have been seen yet: named again next time
                clients = client_ports(self._roles) if pid not in self.db_pids else None
                self._roles[pid] = role(pid, self.api_pid, clients)
            peak = self.peaks.setdefault(pid, Peak(self._roles[pid]))
            peak.role = self._roles[pid]
            peak.update(sample)
            heaps = self.phase_heaps.setdefault(self.phase, {})
            heaps[pid] = max(heaps.get(pid, 0), sample.get("RssAnon", 0))
            side = "db" if self._roles[pid].startswith("post") else "tally"
            sums[f"{side}_anon"] += sample.get("RssAnon", 0)
            sums[f"{side}_pss"] += sample.get("Pss", 0)
            if side == "tally":
                rss = sum(sample.get(k, 0) for k in ("RssAnon", "RssFile", "RssShmem"))
                sums["tally_rss"] += rss
        phase = self.phase_sums.setdefault(self.phase, {})
        for key, value in sums.items():
            phase[key] = max(phase.get(key, 0), value)

    def run(self) -> None:
        while not self._done.is_set():
            self.sample_once()
            self._done.wait(self.interval)

    def finish(self) -> None:
        self._done.set()
        self.join(10)


# --- one backend -----------------------------------------------------------------------


def drive(cfg: run.Config, server: tt.Server, tenant: dict[str, Any], rid: int, q: str) -> Any:
    """The kit's driver for one query; its result (req/s, server CPU per request)."""
    out = cfg.results / f"driver-{q}-{server.port}"
    cmd = [str(cfg.venv / "bin" / "python"), str(cfg.kit / "data_api_bench.py"), "run"]
    cmd += ["--target", "tally", "--base-url", server.base_url, "--api-key", tenant["key"]]
    cmd += ["--workspace-id", str(tenant["workspace_id"]), "--resource-id", str(rid)]
    cmd += ["--meta", str(cfg.meta), "--queries", q, "--engine", cfg.engine]
    cmd += ["--concurrency", str(cfg.concurrency), "--duration", str(cfg.duration)]
    cmd += ["--warmup", str(cfg.warmup), "--out", str(out)]
    for pid in server.pids:
        cmd += ["--server-pid", str(pid)]
    proc = procs.spawn(cmd, env=cfg.kit_env(), cwd=REPO, log_path=cfg.logs / f"driver-{q}.log")
    procs.wait(proc, tt.DRIVER_TIMEOUT_SECONDS)
    figures = json.loads(out.with_suffix(".json").read_text())["queries"][q]
    kept = ("rps", "server_cpu_ms_per_request", "valid", "server_peak_rss_mb")
    # Q6 (the export) reports rows per second and the server's CPU for the whole export
    return {k: figures.get(k) for k in (*kept, "rows_per_s", "server_cpu_s")}


def measure(cfg: run.Config, mem: dict[str, Any], backend: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}", "env": mem["tally_env"]}
    try:
        with fresh_home(cfg, backend, rec, "memory") as fresh:
            _measure(cfg, mem, backend, fresh, rec)
    except Exception as error:  # recorded; the other backend still runs
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    return rec


def _measure(
    cfg: run.Config, mem: dict[str, Any], backend: str, fresh: Home, rec: dict[str, Any]
) -> None:
    """Load, serve, drive the queries while watching every process's memory."""
    fresh.env.update(mem["tally_env"])  # the variables under test, for every process
    home, env, db_pids = fresh.path, fresh.env, fresh.db_pids
    tenant = tt.loaded_tenant(cfg, fresh, rec)
    started = time.perf_counter()
    server = tt.start_server(cfg, env, db_pids)
    watch = MemoryWatch(server.proc.pid, db_pids, mem["sample_seconds"])
    watch.start()
    try:
        watch.phase = "start: the worker's row text and indexes"
        rec["worker_indexes"] = tt.wait_for_indexes(home, env.get("TALLY_DATABASE_URL"), started)
        rid = rec["load"]["resource_id"]
        rec["queries"] = {}
        for q in mem["queries"]:
            watch.phase = q
            log(f"{backend}: {q}")
            rec["queries"][q] = drive(cfg, server, tenant, rid, q)
        rec["loadavg_after"] = os.getloadavg()
    finally:
        watch.finish()
        procs.stop(server.proc)
    rec["processes"] = {str(pid): vars(p) for pid, p in watch.peaks.items()}
    rec["phase_sums_kib"] = watch.phase_sums
    rec["phase_heaps_kib"] = {
        phase: {f"{pid} {watch.peaks[pid].role}": kib for pid, kib in heaps.items()}
        for phase, heaps in watch.phase_heaps.items()
    }


# --- the report ------------------------------------------------------------------------


def _mb(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:,.0f}"


def report(rec: dict[str, Any]) -> str:
    env = " ".join(f"{k}={v}" for k, v in rec["env"].items()) or "defaults"
    lines = [f"### {rec['label']} ({env})", ""]
    if "error" in rec:
        return "\n".join([*lines, f"FAILED: {rec['error']}", ""])
    lines += [
        "| process | peak RSS (VmHWM) | heap (RssAnon) | file pages (RssFile) | shared (RssShmem) "
        "| Pss |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    by_role: dict[str, list[dict[str, int]]] = {}
    for p in rec["processes"].values():
        by_role.setdefault(p["role"], []).append(p["kib"])
    for name, peaks in sorted(by_role.items()):
        label = name if len(peaks) == 1 else f"{name} (x{len(peaks)}, the largest)"
        top = max(peaks, key=lambda k: k.get("VmHWM", 0))
        cells = [_mb(top.get(k)) for k in (*STATUS_FIELDS[3:], *STATUS_FIELDS[:3], "Pss")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    processes = rec["processes"].values()
    hwm = sum(p["kib"].get("VmHWM", 0) for p in processes if "post" not in p["role"])
    kit = [q.get("server_peak_rss_mb") or 0 for q in rec["queries"].values()]
    lines += [
        "",
        f"Sum of tally's processes' VmHWM: {_mb(hwm)} MB; the kit's figure, as its driver "
        f"read it after each query (on PostgreSQL with the cluster's processes), at most "
        f"{max(kit, default=0):,.0f} MB",
        "",
    ]
    lines += [
        "| phase | tally RSS | tally heap (RssAnon) | tally Pss | database heap | database Pss "
        "| req/s | server CPU ms/req |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for phase, sums in rec["phase_sums_kib"].items():
        q = rec["queries"].get(phase, {})
        cells = [_mb(sums.get(k)) for k in ("tally_rss", "tally_anon", "tally_pss")]
        cells += [_mb(sums.get(k)) if sums.get(k) else "-" for k in ("db_anon", "db_pss")]
        if q.get("rows_per_s") is not None:  # the export: rows/s, its whole CPU
            cells += [f"{q['rows_per_s']} rows/s", f"{q.get('server_cpu_s')} s in all"]
        else:
            cells += [str(q.get("rps", "-")), str(q.get("server_cpu_ms_per_request", "-"))]
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    load = rec.get("load", {})
    lines += [
        "",
        f"Load: {load.get('seconds')} s, peak RSS {load.get('peak_rss_mb')} MB (heap "
        f"{load.get('peak_rss_anon_mb')} MB); load average after: {rec.get('loadavg_after')}",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    cfg = run.load_config()
    mem = settings()
    cfg.results = mem["results"].resolve()
    cfg.logs.mkdir(parents=True, exist_ok=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, procs.raise_on_signal)
    records = []
    try:
        run.kit_step(cfg, "setup", "gen")
        for backend in cfg.backends:
            rec = measure(cfg, mem, backend)
            records.append(rec)
            (cfg.results / f"memory-{rec['label']}.json").write_text(json.dumps(rec, indent=1))
    finally:
        procs.stop_everything()
    text = "\n".join(report(r) for r in records)
    (cfg.results / "memory.md").write_text(text)
    print(text)
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
