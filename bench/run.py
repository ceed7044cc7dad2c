#!/usr/bin/env python3
"""tally's benchmark in one command: load the same CSV into tally (SQLite and
PostgreSQL) and into its peers, drive the Data API of all of them in one run, and
write docs/benchmarks.md.

    bench/run.sh                     # everything (12-15 minutes at 1M rows)
    BENCH_SKIP_PEERS=1 bench/run.sh  # tally and the COPY/DuckDB load anchors only
    .venv/bin/python bench/report.py bench/results/<run>   # rewrite the report only

The CSV generator, the load driver and the peers are the shared kit
(<repo>/../shared/bench, or BENCH_KIT): this script runs its run_peers.sh steps and
its data_api_bench.py driver; tally itself is measured by tally_target.py. Order:
kit setup and CSV, load anchors (DuckDB, PostgreSQL COPY), tally on each backend,
the peers, then the kit's merged report and docs/benchmarks.md.

Everything listens on 127.0.0.1, every process started here is stopped by its PID,
and temporary folders are removed; the raw results stay in BENCH_RESULTS
(default bench/results/<UTC time>/). Settings: see bench/README.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import platform
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests")]

import procs  # noqa: E402  (bench/, found through sys.path above)
import report  # noqa: E402
import tally_target  # noqa: E402
from procs import log  # noqa: E402

PEER_STEPS_DEFAULT = "load-sqlite datasette index-sqlite datasette-idx roapi"
ANCHOR_STEPS = ("duckdb", "postgres")
KIT_STEP_TIMEOUT_SECONDS = 1200


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class Config:
    kit: Path
    work: Path
    venv: Path
    results: Path
    docs_out: Path
    rows: int
    seed: int
    concurrency: int
    duration: float
    warmup: float
    engine: str
    backends: list[str]
    skip_peers: bool
    skip_anchors: bool
    peer_steps: list[str]
    tally_workers: int

    @property
    def csv(self) -> Path:
        return self.work / f"transactions_{self.rows}_s{self.seed}.csv"

    @property
    def meta(self) -> Path:
        return Path(f"{self.csv}.meta.json")

    @property
    def logs(self) -> Path:
        return self.results / "logs"

    def kit_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
        env.update(
            BENCH_WORK=str(self.work),
            BENCH_VENV=str(self.venv),
            BENCH_RESULTS=str(self.results),
            BENCH_ROWS=str(self.rows),
            BENCH_SEED=str(self.seed),
            BENCH_CONCURRENCY=str(self.concurrency),
            BENCH_DURATION=f"{self.duration:g}",
            BENCH_WARMUP=f"{self.warmup:g}",
            BENCH_ENGINE=self.engine,
        )
        return env

    def as_json(self) -> dict[str, Any]:
        return {
            "kit": str(self.kit),
            "work": str(self.work),
            "results": str(self.results),
            "rows": self.rows,
            "seed": self.seed,
            "csv": str(self.csv),
            "concurrency": self.concurrency,
            "duration_s": self.duration,
            "warmup_s": self.warmup,
            "engine": self.engine,
            "backends": self.backends,
            "skip_peers": self.skip_peers,
            "skip_anchors": self.skip_anchors,
            "peer_steps": self.peer_steps,
            "tally_workers": self.tally_workers,
            "response_cache": False,
        }


def load_config() -> Config:
    env = os.environ.get
    work = Path(env("BENCH_WORK", "/tmp/tally-bench"))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    backends = [b.strip() for b in env("BENCH_BACKENDS", "sqlite,postgresql").split(",")]
    backends = [b for b in backends if b]  # empty: the peers only
    if not set(backends) <= {"sqlite", "postgresql"}:
        raise SystemExit(f"BENCH_BACKENDS: sqlite and/or postgresql, not {backends}")
    engine = env("BENCH_ENGINE", "raw")
    if engine not in ("raw", "httpx"):
        raise SystemExit("BENCH_ENGINE: raw or httpx")
    return Config(
        kit=Path(env("BENCH_KIT", str(REPO.parent / "shared" / "bench"))).resolve(),
        work=work,
        venv=Path(env("BENCH_VENV", str(work / ".venv-bench"))),
        results=Path(env("BENCH_RESULTS", str(REPO / "bench" / "results" / stamp))).resolve(),
        docs_out=Path(env("BENCH_DOCS_OUT", str(REPO / "docs" / "benchmarks.md"))),
        rows=int(env("BENCH_ROWS", "1000000")),
        seed=int(env("BENCH_SEED", "42")),
        concurrency=int(env("BENCH_CONCURRENCY", "8")),
        duration=float(env("BENCH_DURATION", "10")),
        warmup=float(env("BENCH_WARMUP", "2")),
        engine=engine,
        backends=backends,
        skip_peers=_flag("BENCH_SKIP_PEERS"),
        skip_anchors=_flag("BENCH_SKIP_ANCHORS"),
        peer_steps=env("BENCH_PEER_STEPS", PEER_STEPS_DEFAULT).split(),
        tally_workers=int(env("BENCH_TALLY_WORKERS", "1")),
    )


# --- the shared kit ----------------------------------------------------------------------


def kit_step(cfg: Config, *steps: str) -> int:
    log(f"kit: run_peers.sh {' '.join(steps)}")
    proc = procs.spawn(
        ["bash", str(cfg.kit / "run_peers.sh"), *steps],
        env=cfg.kit_env(),
        cwd=REPO,
        log_path=cfg.logs / "run_peers.log",
    )
    code = procs.wait(proc, KIT_STEP_TIMEOUT_SECONDS)
    if code != 0:
        log(f"kit: run_peers.sh {' '.join(steps)} exited {code}; see {cfg.logs}/run_peers.log")
    return code


def import_driver(cfg: Config) -> ModuleType:
    """The kit's data_api_bench.py: its query definitions, adapters and checks."""
    sys.dont_write_bytecode = True  # the kit's folder is shared (and read-only)
    sys.path.insert(0, str(cfg.kit))
    try:
        return importlib.import_module("data_api_bench")
    finally:
        sys.path.remove(str(cfg.kit))


# --- facts about this machine and this tally ----------------------------------------------


def git_sha() -> str:
    """HEAD's commit, read from .git (the benchmark never runs git); in a worktree .git
    is a file naming its folder, whose refs are in the main checkout's (`commondir`)."""
    git = common = REPO / ".git"
    with contextlib.suppress(OSError):
        if git.is_file():
            git = Path(git.read_text().strip().removeprefix("gitdir: "))
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head.removeprefix("ref: ")
        if (common / ref).exists():
            return (common / ref).read_text().strip()
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    return "unknown"


def versions() -> dict[str, Any]:
    import tally

    def dist(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    packages = ("fastapi", "uvicorn", "starlette", "sqlalchemy", "psycopg", "orjson", "zlib-ng")
    return {
        "tally": tally.__version__,
        "tally_git_sha": git_sha(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        **{name: dist(name) for name in packages},
    }


def machine() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "tmp": tempfile.gettempdir(),
        "loadavg_at_start": os.getloadavg(),
    }
    with contextlib.suppress(OSError, StopIteration):
        cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
        facts["cpu_model"] = next(x for x in cpuinfo if x.startswith("model name")).split(":")[1]
        facts["cpu_model"] = facts["cpu_model"].strip()
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
        facts["mem_total_gib"] = round(mem_kib / 2**20, 1)
        release = Path("/etc/os-release").read_text().splitlines()
        pretty = next(x for x in release if x.startswith("PRETTY_NAME="))
        facts["os"] = pretty.split("=", 1)[1].strip('"')
    return facts


# --- the run ---------------------------------------------------------------------------------


class RunRecord:
    """run.json, rewritten after every phase so a stopped run still tells how far it got."""

    def __init__(self, cfg: Config) -> None:
        self.path = cfg.results / "run.json"
        self.data: dict[str, Any] = {
            "settings": cfg.as_json(),
            "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions(),
            "phases": {},
            "kit_steps": {},
        }

    def save(self) -> None:
        self.path.write_text(json.dumps(self.data, indent=2) + "\n")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.data["phases"][name] = round(time.perf_counter() - t, 1)
            self.save()


def run_all(cfg: Config) -> int:
    cfg.logs.mkdir(parents=True, exist_ok=True)
    run = RunRecord(cfg)
    log(f"results in {cfg.results}")
    with run.phase("setup+gen"):
        if kit_step(cfg, "setup", "gen") != 0 or not cfg.meta.exists():
            raise SystemExit("the kit could not set up its venv or generate the CSV")
    driver = import_driver(cfg)
    for step in () if cfg.skip_anchors else ANCHOR_STEPS:
        with run.phase(f"anchor {step}"):
            run.data["kit_steps"][step] = kit_step(cfg, step)
    for backend in cfg.backends:
        with run.phase(f"tally {backend}"):
            rec = tally_target.run_backend(cfg, backend, driver, run.data["versions"])
            (cfg.results / f"tally-{backend}.json").write_text(json.dumps(rec, indent=2) + "\n")
            if line := tally_target.ingest_line(rec):
                with open(cfg.results / "ingest.jsonl", "a") as f:
                    f.write(json.dumps(line) + "\n")
    for step in () if cfg.skip_peers else cfg.peer_steps:
        with run.phase(f"peer {step}"):
            run.data["kit_steps"][step] = kit_step(cfg, step)
    with run.phase("report"):
        run.data["kit_steps"]["report"] = kit_step(cfg, "report")
        run.data["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    report.write(cfg.results, cfg.docs_out)
    log(f"wrote {cfg.docs_out} (raw results in {cfg.results})")
    failed = [
        b
        for b in cfg.backends
        if "error" in json.loads((cfg.results / f"tally-{b}.json").read_text())
    ]
    return 1 if failed else 0


def main() -> int:
    if len(sys.argv) > 1:
        print(__doc__)
        return 0 if sys.argv[1] in ("-h", "--help", "help") else 2
    cfg = load_config()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, procs.raise_on_signal)
    try:
        return run_all(cfg)
    except (KeyboardInterrupt, SystemExit):
        log("stopped: stopping every process this run started")
        raise
    finally:
        procs.stop_everything()


if __name__ == "__main__":
    sys.exit(main())
