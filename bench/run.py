#!/usr/bin/env python3
"""tally's benchmark in one command: load the same CSV into tally (SQLite and
PostgreSQL) and into its peers, drive the Data API of all of them in one run, and
write docs/benchmarks.md.

    bench/run.sh                     # everything (about 12 minutes at 1M rows)
    BENCH_SKIP_PEERS=1 bench/run.sh  # tally (+ the COPY/DuckDB load anchors) only
    .venv/bin/python bench/report.py bench/results/<run>   # rewrite the report only

The peers, the CSV generator and the load driver are the shared kit
(<repo>/../shared/bench, or BENCH_KIT): this script calls its run_peers.sh steps and
its data_api_bench.py driver, and measures tally itself:

* a fresh TALLY_HOME per backend; on PostgreSQL a fresh throwaway cluster from
  tests/support/pg.py, restarted with the server's default durability (fsync,
  synchronous_commit and full_page_writes on);
* `tally admin load` of the CSV: wall time, when the rows became readable and when
  the indexes were built (read from the catalogue while the load runs), CPU and peak
  RSS of the process, and the same for a tenth of the file (constant memory?);
* `tally serve` with the response cache off, then the first request of each filter
  set never seen before (Q2, Q3, Q5), then the kit's driver at the set concurrency.

Everything listens on 127.0.0.1, every process started here is stopped by its PID,
and the temporary folders are removed; results stay in BENCH_RESULTS.
Environment: see bench/README.md (BENCH_ROWS, BENCH_DURATION, BENCH_CONCURRENCY,
BENCH_SKIP_PEERS, BENCH_BACKENDS, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import gzip
import http.client
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

import report  # noqa: E402  (bench/report.py)

from support.pg import PostgresServer, create_database, start_postgres  # noqa: E402

TALLY = REPO / ".venv" / "bin" / "tally"
PEER_STEPS_DEFAULT = "load-sqlite datasette index-sqlite datasette-idx roapi"
ANCHOR_STEPS = ("duckdb", "postgres")
SERVER_START_SECONDS = 60
DRIVER_TIMEOUT_SECONDS = 1800
KIT_STEP_TIMEOUT_SECONDS = 1200
POLL_SECONDS = 0.05


# --- settings -----------------------------------------------------------------------


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
            BENCH_WORK=str(self.work), BENCH_VENV=str(self.venv), BENCH_RESULTS=str(self.results),
            BENCH_ROWS=str(self.rows), BENCH_SEED=str(self.seed),
            BENCH_CONCURRENCY=str(self.concurrency), BENCH_DURATION=str(self.duration),
            BENCH_WARMUP=str(self.warmup), BENCH_ENGINE=self.engine,
        )
        return env

    def as_json(self) -> dict[str, Any]:
        return {
            "kit": str(self.kit), "work": str(self.work), "results": str(self.results),
            "rows": self.rows, "seed": self.seed, "csv": str(self.csv),
            "concurrency": self.concurrency, "duration_s": self.duration,
            "warmup_s": self.warmup, "engine": self.engine, "backends": self.backends,
            "skip_peers": self.skip_peers, "skip_anchors": self.skip_anchors,
            "peer_steps": self.peer_steps, "tally_workers": self.tally_workers,
            "response_cache": False,
        }


def load_config() -> Config:
    env = os.environ.get
    work = Path(env("BENCH_WORK", "/tmp/tally-bench"))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    backends = [b.strip() for b in env("BENCH_BACKENDS", "sqlite,postgresql").split(",")]
    unknown = [b for b in backends if b not in ("sqlite", "postgresql")]
    if unknown or not backends:
        raise SystemExit(f"BENCH_BACKENDS: unknown backend(s) {unknown}")
    engine = env("BENCH_ENGINE", "raw")
    if engine not in ("raw", "httpx"):
        raise SystemExit("BENCH_ENGINE must be raw or httpx")
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


def log(message: str) -> None:
    print(f"[bench {dt.datetime.now(dt.UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


# --- processes: every child is remembered and stopped by its PID -------------------

_children: list[subprocess.Popen[bytes]] = []
_postgres: list[PostgresServer] = []


def spawn(cmd: list[str], *, env: dict[str, str], log_path: Path,
          stdout: Path | None = None) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as err, open(stdout or log_path, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=REPO)
    _children.append(proc)
    return proc


def stop(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM by PID, then SIGKILL if it has not exited after `grace` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc in _children:
        _children.remove(proc)


def stop_everything() -> None:
    for proc in list(reversed(_children)):
        stop(proc)
    for server in list(_postgres):
        server.stop()
        _postgres.remove(server)


def _on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def wait_child(proc: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"pid {proc.pid} still running after {timeout:.0f} s: stopping it")
        stop(proc)
        return -1
    finally:
        if proc in _children:
            _children.remove(proc)


def run_tally_cli(args: list[str], env: dict[str, str], log_path: Path) -> dict[str, Any]:
    """One `tally admin ...` command; its stdout is one JSON object."""
    out = subprocess.run([str(TALLY), *args], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=600, check=False)
    with open(log_path, "a") as f:
        f.write(f"$ tally {' '.join(args)}\n{out.stderr}{out.stdout}\n")
    if out.returncode != 0:
        raise RuntimeError(f"tally {' '.join(args)} failed ({out.returncode}): "
                           f"{out.stdout.strip()} {out.stderr.strip()[-500:]}")
    parsed: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- the shared kit ----------------------------------------------------------------


def kit_steps(cfg: Config, *steps: str, timeout: float = KIT_STEP_TIMEOUT_SECONDS) -> int:
    log(f"kit: run_peers.sh {' '.join(steps)}")
    proc = spawn(["bash", str(cfg.kit / "run_peers.sh"), *steps], env=cfg.kit_env(),
                 log_path=cfg.logs / "run_peers.log")
    code = wait_child(proc, timeout)
    if code != 0:
        log(f"kit: run_peers.sh {' '.join(steps)} exited {code} (see {cfg.logs}/run_peers.log)")
    return code


def import_driver(cfg: Config) -> ModuleType:
    """The kit's data_api_bench.py, for its query definitions, checks and /proc reader."""
    sys.dont_write_bytecode = True  # the kit folder is shared and read-only
    sys.path.insert(0, str(cfg.kit))
    try:
        import data_api_bench
    finally:
        sys.path.remove(str(cfg.kit))
    return data_api_bench


# --- PostgreSQL with normal durability -----------------------------------------------


def _as_owner(cmd: list[str]) -> None:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)


def start_durable_postgres() -> PostgresServer:
    """tests/support/pg.py's throwaway cluster, restarted without its test-only
    settings (fsync/synchronous_commit/full_page_writes off, bigger buffers): the
    server's defaults, like the kit's COPY anchor."""
    server = start_postgres()
    _postgres.append(server)
    data, pg_ctl = server.folder / "data", str(server.bindir / "pg_ctl")
    _as_owner([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"])
    options = (f"-c listen_addresses=127.0.0.1 -c port={server.port} "
               "-c unix_socket_directories=''")
    _as_owner([pg_ctl, "-D", str(data), "-o", options, "-l", str(server.folder / "log"),
               "-w", "-t", "60", "start"])
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return server
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def postgres_facts(server: PostgresServer) -> dict[str, Any]:
    import psycopg

    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes",
             "wal_level", "shared_buffers", "max_wal_size", "autovacuum")
    with psycopg.connect(server.url(), autocommit=True) as conn:
        facts = {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}  # type: ignore[index]
    facts["postmaster_pid"] = postmaster_pid(server)
    return facts


def postmaster_pid(server: PostgresServer) -> int:
    return int((server.folder / "data" / "postmaster.pid").read_text().split()[0])


# --- loading ------------------------------------------------------------------------


class CatalogueWatch(threading.Thread):
    """Reads the resource's catalogue row while a load runs: when the rows were
    committed (row_count > 0) and when its indexes were built (indexed_version)."""

    def __init__(self, backend: str, home: Path, url: str | None, name: str) -> None:
        super().__init__(daemon=True)
        self.backend, self.home, self.url, self.name = backend, home, url, name
        self.t0 = time.perf_counter()
        self.rows_at: float | None = None
        self.indexed_at: float | None = None
        self._done = threading.Event()

    def _read(self, conn: Any) -> tuple[int, int, int] | None:
        sql = ("SELECT row_count, data_version, indexed_version FROM resources "
               "WHERE name = {}").format("?" if self.backend == "sqlite" else "%s")
        row = conn.execute(sql, (self.name,)).fetchone()
        return None if row is None else (int(row[0]), int(row[1]), int(row[2]))

    def _connect(self) -> Any:
        if self.backend == "sqlite":
            uri = f"file:{self.home / 'tally.db'}?mode=ro"
            return sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None)
        import psycopg

        assert self.url is not None
        return psycopg.connect(self.url, autocommit=True)

    def run(self) -> None:
        conn = None
        while not self._done.is_set():
            try:
                conn = conn or self._connect()
                state = self._read(conn)
            except Exception:
                state = None
            now = time.perf_counter() - self.t0
            if state and state[0] > 0 and self.rows_at is None:
                self.rows_at = now
            if state and state[2] > 0 and state[2] == state[1] and self.indexed_at is None:
                self.indexed_at = now
                break
            self._done.wait(POLL_SECONDS)
        if conn is not None:
            conn.close()

    def finish(self) -> None:
        self._done.set()
        self.join(5)


def proc_tree_cpu(driver: ModuleType, pids: list[int]) -> float | None:
    sample = driver.ProcWatch(pids).sample() if pids else None
    return None if sample is None else float(sample["cpu_s"])


def timed_load(cfg: Config, env: dict[str, str], *, backend: str, home: Path,
               workspace: int, name: str, csv: Path, driver: ModuleType,
               db_pids: list[int]) -> dict[str, Any]:
    """`tally admin load` of `csv`, with wall time, phases, CPU and peak RSS."""
    stdout = Path(tempfile.mkstemp(prefix="tally-load-", suffix=".json")[1])
    watch = CatalogueWatch(backend, home, env.get("TALLY_DATABASE_URL"), name)
    db_cpu0 = proc_tree_cpu(driver, db_pids)
    try:
        watch.start()
        t0 = time.perf_counter()
        proc = spawn([str(TALLY), "admin", "load", "--workspace", str(workspace),
                      "--name", name, str(csv)], env=env,
                     log_path=cfg.logs / f"tally-{backend}-load.log", stdout=stdout)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        _children.remove(proc)
        watch.finish()
        output = stdout.read_text().strip()
    finally:
        watch.finish()
        stdout.unlink(missing_ok=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tally admin load failed ({proc.returncode}): {output[-500:]}")
    loaded = json.loads(output.splitlines()[-1])
    db_cpu1 = proc_tree_cpu(driver, db_pids)
    return {
        "csv": str(csv), "csv_bytes": csv.stat().st_size, "resource_id": loaded["id"],
        "rows": loaded["rows"], "seconds": round(seconds, 3),
        "rows_readable_s": None if watch.rows_at is None else round(watch.rows_at, 3),
        "indexes_built_s": None if watch.indexed_at is None else round(watch.indexed_at, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "db_server_cpu_s": (None if db_cpu0 is None or db_cpu1 is None
                            else round(db_cpu1 - db_cpu0, 3)),
        "poll_interval_s": POLL_SECONDS,
    }


def head_of(csv: Path, rows: int, folder: Path) -> Path:
    """The header and the first `rows` lines (the kit's CSV has no quoted newlines)."""
    out = folder / f"head_{rows}.csv"
    with open(csv, "rb") as src, open(out, "wb") as dst:
        for _ in range(rows + 1):
            line = src.readline()
            if not line:
                break
            dst.write(line)
    return out


# --- serving ------------------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    pids: list[int] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_server(cfg: Config, env: dict[str, str], backend: str, db_pids: list[int]) -> Server:
    port = free_port()
    proc = spawn([str(TALLY), "serve", "--host", "127.0.0.1", "--port", str(port),
                  "--workers", str(cfg.tally_workers)], env=env,
                 log_path=cfg.logs / f"tally-{backend}-serve.log")
    deadline = time.monotonic() + SERVER_START_SECONDS
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"tally serve exited {proc.returncode}; see {cfg.logs}")
        with contextlib.suppress(OSError, http.client.HTTPException):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return Server(proc, port, [proc.pid, *db_pids])
        if time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError("tally serve did not answer /health")
        time.sleep(0.1)


def _get(conn: http.client.HTTPConnection, path: str, headers: dict[str, str],
         ) -> tuple[int, bytes, float]:
    t = time.perf_counter()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    elapsed = time.perf_counter() - t
    if resp.getheader("content-encoding") == "gzip":
        body = gzip.decompress(body)
    return resp.status, body, elapsed


def first_requests(cfg: Config, server: Server, tenant: dict[str, Any], resource_id: int,
                   driver: ModuleType) -> list[dict[str, Any]]:
    """Q2, Q3, Q5 sent once each right after start (no count of their filters is
    memoised yet), then once more; the driver's warm-up comes only after."""
    expected = json.loads(cfg.meta.read_text()).get("expected", {})
    counterparty = expected.get("Q5_counterparty") or driver.default_counterparty()
    queries = driver.logical_queries(counterparty)
    adapter = driver.TallyAdapter(server.base_url, tenant["key"], tenant["workspace_id"],
                                  resource_id)
    headers = {"Accept": "application/json", "Accept-Encoding": "gzip",
               **adapter.client_headers()}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    watch = driver.ProcWatch(server.pids)
    # Process warm-up that memoises nothing: a page of the unfiltered rows.
    _get(conn, f"/api/v1/resources/{resource_id}/data?page_size=1", headers)
    out: dict[str, dict[str, Any]] = {}
    for attempt in ("first", "second"):
        for name in ("Q2", "Q3", "Q5"):
            q = queries[name]
            req = asyncio.run(adapter.build(None, q))
            cpu0 = watch.sample()["cpu_s"]
            status, body, elapsed = _get(conn, req.path, headers)
            cpu = watch.sample()["cpu_s"] - cpu0
            rec = out.setdefault(name, {"query": name, "url": req.display})
            rec[f"{attempt}_ms"] = round(elapsed * 1000, 1)
            rec[f"{attempt}_server_cpu_ms"] = round(cpu * 1000, 1)
            rec[f"{attempt}_status"] = status
            if status == 200 and attempt == "first":
                page = adapter.parse(json.loads(body))
                rec["total_count"] = page.total_count
                rec["checks"] = driver.validate(q, page, expected, counterparty)
                rec["valid"] = not any(c.startswith("FAIL") for c in rec["checks"])
    conn.close()
    return list(out.values())


def run_driver(cfg: Config, server: Server, tenant: dict[str, Any], resource_id: int,
               backend: str, version: str) -> int:
    label = f"tally-{backend}"
    cmd = [str(cfg.venv / "bin" / "python"), str(cfg.kit / "data_api_bench.py"), "run",
           "--target", "tally", "--base-url", server.base_url,
           "--api-key", tenant["key"], "--workspace-id", str(tenant["workspace_id"]),
           "--resource-id", str(resource_id), "--meta", str(cfg.meta),
           "--concurrency", str(cfg.concurrency), "--duration", str(cfg.duration),
           "--warmup", str(cfg.warmup), "--engine", cfg.engine, "--label", label,
           "--target-version", version,
           "--note", (f"tally serve, {backend}, TALLY_RESPONSE_CACHE=false, "
                      f"{cfg.tally_workers} process(es); server CPU includes "
                      + ("the PostgreSQL server's processes" if backend == "postgresql"
                         else "everything (SQLite is in-process)")),
           "--out", str(cfg.results / f"bench-{label}")]
    for pid in server.pids:
        cmd += ["--server-pid", str(pid)]
    log(f"driver: {label} (Q1-Q6, concurrency {cfg.concurrency}, {cfg.duration:g} s each)")
    proc = spawn(cmd, env=cfg.kit_env(), log_path=cfg.logs / f"driver-{label}.log",
                 stdout=cfg.logs / f"driver-{label}.md")
    return wait_child(proc, DRIVER_TIMEOUT_SECONDS)


# --- one backend --------------------------------------------------------------------


def tally_env(cfg: Config, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    env.update(TALLY_HOME=str(home), TALLY_RESPONSE_CACHE="false",
               TALLY_WEB_CONCURRENCY=str(cfg.tally_workers))
    return env


def make_tenant(env: dict[str, str], log_path: Path) -> dict[str, Any]:
    account = run_tally_cli(["admin", "create-account", "--name", "bench"], env, log_path)
    workspace = run_tally_cli(["admin", "create-workspace", "--account", str(account["id"]),
                               "--name", "bench"], env, log_path)
    t = time.perf_counter()
    key = run_tally_cli(["admin", "create-key", "--workspace", str(workspace["id"])], env,
                        log_path)
    return {"key": key["key"], "workspace_id": workspace["id"],
            "cli_start_s": round(time.perf_counter() - t, 3)}


def vacuum(url: str) -> float:
    """What autovacuum would do within a minute of the load, done before the timed
    windows so that it does not run inside them."""
    import psycopg

    t = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return round(time.perf_counter() - t, 3)


def run_backend(cfg: Config, backend: str, driver: ModuleType, versions: dict[str, Any],
                ) -> dict[str, Any]:
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}"}
    home = Path(tempfile.mkdtemp(prefix=f"tally-bench-{backend}-"))
    server: Server | None = None
    pg: PostgresServer | None = None
    logfile = cfg.logs / f"tally-{backend}-admin.log"
    try:
        env = tally_env(cfg, home)
        db_pids: list[int] = []
        if backend == "postgresql":
            log("postgresql: starting a throwaway cluster (default durability)")
            pg = start_durable_postgres()
            env["TALLY_DATABASE_URL"] = create_database(pg, "tally_bench")
            rec["postgres"] = postgres_facts(pg)
            db_pids = [rec["postgres"]["postmaster_pid"]]
        tenant = make_tenant(env, logfile)
        rec["cli_start_s"] = tenant["cli_start_s"]
        log(f"{backend}: tally admin load ({cfg.rows:,} rows)")
        rec["load"] = timed_load(cfg, env, backend=backend, home=home,
                                 workspace=tenant["workspace_id"], name="transactions",
                                 csv=cfg.csv, driver=driver, db_pids=db_pids)
        log(f"{backend}: loaded in {rec['load']['seconds']} s "
            f"(rows readable at {rec['load']['rows_readable_s']} s)")
        tenth = max(1, cfg.rows // 10)
        rec["load_tenth"] = timed_load(
            cfg, env, backend=backend, home=home, workspace=tenant["workspace_id"],
            name="transactions_tenth", csv=head_of(cfg.csv, tenth, home), driver=driver,
            db_pids=db_pids)
        if pg is not None:
            rec["vacuum_s"] = vacuum(env["TALLY_DATABASE_URL"])
        server = start_server(cfg, env, backend, db_pids)
        rec["first_requests"] = first_requests(cfg, server, tenant, rec["load"]["resource_id"],
                                               driver)
        version = (f"tally {versions['tally']} ({versions['tally_git_sha'][:12]}), "
                   + (f"SQLite {versions['sqlite']}" if backend == "sqlite"
                      else f"PostgreSQL {rec['postgres']['server_version']}"))
        rec["driver_exit"] = run_driver(cfg, server, tenant, rec["load"]["resource_id"],
                                        backend, version)
        rec["server_log_tail"] = _tail(cfg.logs / f"tally-{backend}-serve.log")
    except Exception as error:
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    finally:
        if server is not None:
            stop(server.proc)
        if pg is not None:
            pg.stop()
            _postgres.remove(pg)
        shutil.rmtree(home, ignore_errors=True)
    return rec


def _tail(path: Path, lines: int = 5) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def ingest_records(cfg: Config, rec: dict[str, Any]) -> None:
    """tally's loads as lines of the kit's ingest.jsonl, so its merged report shows them."""
    load = rec.get("load")
    if not load:
        return
    system = f"tally ({rec['backend']})"
    lines = [{
        "system": system, "method": "tally admin load (new source; rows, then indexes)",
        "rows": load["rows"], "csv_bytes": load["csv_bytes"], "seconds": load["seconds"],
        "ok": True,
        "note": (f"rows readable at {load['rows_readable_s']} s; peak RSS "
                 f"{load['peak_rss_mb']} MB; process start-up ~{rec.get('cli_start_s')} s"),
    }]
    with open(cfg.results / "ingest.jsonl", "a") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


# --- versions and the whole run -------------------------------------------------------


def git_sha() -> str:
    """HEAD's commit, read from .git without running git."""
    git = REPO / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).exists():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return "unknown"


def versions() -> dict[str, Any]:
    import tally

    def dist(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "tally": tally.__version__, "tally_git_sha": git_sha(),
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        **{name: dist(name) for name in ("fastapi", "uvicorn", "starlette", "sqlalchemy",
                                         "psycopg", "orjson")},
    }


def machine() -> dict[str, Any]:
    facts: dict[str, Any] = {"kernel": platform.release(), "cpus": os.cpu_count(),
                             "tmp": tempfile.gettempdir()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                facts["cpu_model"] = line.split(":", 1)[1].strip()
                break
        first = Path("/proc/meminfo").read_text().splitlines()[0]
        facts["mem_total_gib"] = round(int(first.split()[1]) / 2**20, 1)
    with contextlib.suppress(OSError):
        facts["os"] = next(
            line.split("=", 1)[1].strip('"')
            for line in Path("/etc/os-release").read_text().splitlines()
            if line.startswith("PRETTY_NAME="))
    facts["loadavg_at_start"] = os.getloadavg()
    return facts


@contextlib.contextmanager
def phase(run: dict[str, Any], name: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        run["phases"][name] = round(time.perf_counter() - t, 1)
        write_json(run["_path"], {k: v for k, v in run.items() if not k.startswith("_")})


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def run_all(cfg: Config) -> int:
    cfg.logs.mkdir(parents=True, exist_ok=True)
    run: dict[str, Any] = {
        "_path": cfg.results / "run.json", "settings": cfg.as_json(),
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(), "versions": versions(), "phases": {}, "kit_steps": {},
    }
    log(f"results in {cfg.results}")
    with phase(run, "setup+gen"):
        if kit_steps(cfg, "setup", "gen") != 0 or not cfg.meta.exists():
            raise SystemExit("the kit could not set up its venv or generate the CSV")
    driver = import_driver(cfg)
    if not cfg.skip_anchors:
        for step in ANCHOR_STEPS:
            with phase(run, f"anchor {step}"):
                run["kit_steps"][step] = kit_steps(cfg, step)
    for backend in cfg.backends:
        with phase(run, f"tally {backend}"):
            rec = run_backend(cfg, backend, driver, run["versions"])
            write_json(cfg.results / f"tally-{backend}.json", rec)
            ingest_records(cfg, rec)
    if not cfg.skip_peers:
        for step in cfg.peer_steps:
            with phase(run, f"peer {step}"):
                run["kit_steps"][step] = kit_steps(cfg, step)
    with phase(run, "report"):
        run["kit_steps"]["report"] = kit_steps(cfg, "report")
        run["finished_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        write_json(run["_path"], {k: v for k, v in run.items() if not k.startswith("_")})
        report.write(cfg.results, cfg.docs_out)
    log(f"wrote {cfg.docs_out} (raw results in {cfg.results})")
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    cfg = load_config()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    try:
        return run_all(cfg)
    finally:
        stop_everything()


if __name__ == "__main__":
    sys.exit(main())
