"""tally as a benchmark target, one backend at a time: a fresh home (and PostgreSQL
cluster), the timed `tally admin load`, `tally serve` with the response cache off,
the first requests of never-seen filter sets, then the kit's driver.

Only tally's public surfaces are used (its CLI and HTTP API), plus a read-only look at
the catalogue's `resources` row to see when a load's rows and indexes landed.
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import procs
from durable_pg import postgres_facts, start_durable_postgres, vacuum
from procs import log

from support.pg import create_database

if TYPE_CHECKING:
    from run import Config

REPO = Path(__file__).resolve().parent.parent
# BENCH_TALLY: another build's `tally` timed by this same harness (a regression check of
# two commits: the other checkout's own venv, same data, same driver)
TALLY = Path(os.environ.get("BENCH_TALLY", REPO / ".venv" / "bin" / "tally"))
SERVER_START_SECONDS = 60
DRIVER_TIMEOUT_SECONDS = 1800
POLL_SECONDS = 0.05
FIRST_REQUEST_QUERIES = ("Q2", "Q3", "Q5")
PARTS = (("tenth", 10), ("half", 2))  # heads of the CSV loaded after it, for memory


# --- loading --------------------------------------------------------------------------


def catalogue_connection(home: Path, url: str | None) -> Any:
    """A read-only look at tally's catalogue (SQLite file or PostgreSQL database)."""
    if url is None:
        uri = f"file:{home / 'tally.db'}?mode=ro"
        return sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None)
    import psycopg

    return psycopg.connect(url, autocommit=True)


class LoadWatch(threading.Thread):
    """Watches a load from outside: the resource's catalogue row tells when its rows
    were committed (row_count > 0); the load process's /proc status gives its peak
    anonymous memory (heap, not mapped files)."""

    def __init__(self, home: Path, url: str | None, name: str) -> None:
        super().__init__(daemon=True)
        self.home, self.url, self.name = home, url, name
        self.t0 = time.perf_counter()
        self.pid: int | None = None
        self.rows_at: float | None = None
        self.peak_kib = {"RssAnon": 0, "RssFile": 0}
        self._done = threading.Event()

    def _read(self, conn: Any) -> int | None:
        mark = "?" if self.url is None else "%s"
        sql = f"SELECT row_count FROM resources WHERE name = {mark}"
        row = conn.execute(sql, (self.name,)).fetchone()
        return None if row is None else int(row[0])

    def _sample_memory(self) -> None:
        try:
            status = Path(f"/proc/{self.pid}/status").read_text().splitlines()
        except OSError:
            return
        for line in status:
            key, _, value = line.partition(":")
            if key in self.peak_kib:
                self.peak_kib[key] = max(self.peak_kib[key], int(value.split()[0]))

    def _look(self, conn: Any) -> Any:
        try:
            conn = conn or catalogue_connection(self.home, self.url)
            state = self._read(conn)
        except Exception:  # busy, or not there yet: look again
            return conn
        now = time.perf_counter() - self.t0
        if state and self.rows_at is None:
            self.rows_at = now
        return conn

    def run(self) -> None:
        conn = None
        while not self._done.is_set():
            if self.pid is not None:
                self._sample_memory()
            if self.rows_at is None:
                conn = self._look(conn)
            self._done.wait(POLL_SECONDS)
        if self.rows_at is None:  # committed after the last look: the command's end
            conn = self._look(conn)
        if conn is not None:
            conn.close()

    def finish(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join(5)


def timed_load(
    cfg: Config,
    env: dict[str, str],
    *,
    home: Path,
    workspace: int,
    name: str,
    csv: Path,
    db_pids: list[int],
) -> dict[str, Any]:
    """`tally admin load` of `csv`: wall time, phases, CPU and peak RSS."""
    fd, out_name = tempfile.mkstemp(prefix="tally-load-", suffix=".json", dir=home)
    os.close(fd)
    stdout = Path(out_name)
    watch = LoadWatch(home, env.get("TALLY_DATABASE_URL"), name)
    db_cpu0 = procs.tree_cpu_seconds(db_pids)
    log_path = cfg.logs / f"{cfg_label(env)}-load.log"
    cmd = [str(TALLY), "admin", "load", "--workspace", str(workspace), "--name", name, str(csv)]
    try:
        watch.t0 = t0 = time.perf_counter()
        proc = procs.spawn(cmd, env=env, cwd=REPO, stdout=stdout, log_path=log_path)
        watch.pid = proc.pid
        watch.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        procs.forget(proc)
    finally:
        watch.finish()
    output = stdout.read_text().strip()
    stdout.unlink()
    if proc.returncode != 0:
        last = log_path.read_text(errors="replace").strip().splitlines()[-1:]
        raise RuntimeError(f"tally admin load exited {proc.returncode}: {output} {last}")
    loaded = json.loads(output.splitlines()[-1])
    return {
        "csv": str(csv),
        "csv_bytes": csv.stat().st_size,
        "resource_id": loaded["id"],
        "rows": loaded["rows"],
        "seconds": round(seconds, 3),
        "rows_readable_s": _rounded(watch.rows_at),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "peak_rss_anon_mb": round(watch.peak_kib["RssAnon"] / 1024, 1),
        "peak_rss_file_mb": round(watch.peak_kib["RssFile"] / 1024, 1),
        "db_server_cpu_s": round(procs.tree_cpu_seconds(db_pids) - db_cpu0, 3) if db_pids else None,
        "poll_interval_s": POLL_SECONDS,
    }


def wait_for_indexes(home: Path, url: str | None, started: float) -> dict[str, Any]:
    """`tally admin load` returns once the rows are committed; the worker of the
    `tally serve` started at `started` stores the loaded sources' row JSON and builds
    their indexes (decisions 0010, 0011), then on PostgreSQL vacuums and analyses each
    table. Waits for every source's, so no such work runs
    inside a timed window, and says how long it took from the server's start (start-up
    included) and from the server's answer."""
    answered = time.perf_counter() - started
    conn = None
    deadline = time.monotonic() + SERVER_START_SECONDS * 10
    while time.monotonic() < deadline:
        try:
            conn = conn or catalogue_connection(home, url)
            left = conn.execute(
                "SELECT count(*) FROM resources"
                " WHERE data_version > 0"
                " AND (indexed_version <> data_version OR rendered_version <> data_version)"
            ).fetchone()[0]
            if left == 0 and url is not None:
                # the worker records a source indexed, then runs its VACUUM (ANALYZE):
                # seconds of the server's CPU that would land in the first timed query
                left = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'VACUUM%'"
                    " AND state = 'active' AND pid <> pg_backend_pid()"
                ).fetchone()[0]
        except Exception:  # busy: look again
            left = None
        if left == 0:
            break
        time.sleep(POLL_SECONDS)
    else:
        raise RuntimeError("the worker did not build the loaded sources' indexes")
    if conn is not None:
        conn.close()
    return {
        "seconds_from_serve_start": round(time.perf_counter() - started, 3),
        "server_answered_s": round(answered, 3),
    }


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def cfg_label(env: dict[str, str]) -> str:
    return "tally-postgresql" if env.get("TALLY_DATABASE_URL") else "tally-sqlite"


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


# --- serving and measuring ------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    pids: list[int]  # tally's process and, on PostgreSQL, the postmaster
    log_path: Path  # its stderr: the log lines of every process of `tally serve`

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_server(cfg: Config, env: dict[str, str], db_pids: list[int]) -> Server:
    port = procs.free_port()
    cmd = [str(TALLY), "serve", "--host", "127.0.0.1", "--port", str(port)]
    log_path = cfg.logs / f"{cfg_label(env)}-serve.log"
    proc = procs.spawn(
        [*cmd, "--workers", str(cfg.tally_workers)], env=env, cwd=REPO, log_path=log_path
    )
    deadline = time.monotonic() + SERVER_START_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return Server(proc, port, [proc.pid, *db_pids], log_path)
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
        finally:
            conn.close()
    procs.stop(proc)
    raise RuntimeError(f"tally serve did not answer /health; see {cfg.logs}")


SNAPSHOT_ENDS = re.compile(r"column_snapshot_(built|outdated|over_budget|failed)\b(.*)")


def wait_for_snapshots(serve_log: Path) -> dict[str, Any]:
    """The first requests of filter sets start a column snapshot's build in a query
    process (decision 0014): seconds of one process's CPU, once per data version, which
    would otherwise fall inside the next timed windows (Q1's: decision 0014 measured its
    CPU per request 1.9 -> 3.4 ms). Waits, as for the indexes, until every build the
    server's log says started has said how it ended; returns how long that took and the
    end lines."""
    t = time.perf_counter()
    deadline = time.monotonic() + SERVER_START_SECONDS * 5
    while time.monotonic() < deadline:
        lines = serve_log.read_text(errors="replace").splitlines()
        started = sum("column_snapshot_started" in line for line in lines)
        ended = [m.group(0) for line in lines if (m := SNAPSHOT_ENDS.search(line))]
        if len(ended) >= started:
            return {"waited_s": round(time.perf_counter() - t, 3), "ended": ended}
        time.sleep(POLL_SECONDS)
    raise RuntimeError(f"a column snapshot's build did not end; see {serve_log}")


def _get(
    conn: http.client.HTTPConnection,
    path: str,
    headers: dict[str, str],
) -> tuple[int, bytes, float]:
    t = time.perf_counter()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    elapsed = time.perf_counter() - t
    if resp.getheader("content-encoding") == "gzip":
        body = gzip.decompress(body)
    return resp.status, body, elapsed


def first_requests(
    cfg: Config, server: Server, tenant: dict[str, Any], resource_id: int, driver: ModuleType
) -> list[dict[str, Any]]:
    """Q2, Q3 and Q5 once each right after start, when no count of their filters is
    memoised, then once more; the driver's warm-up comes only after."""
    expected = json.loads(cfg.meta.read_text()).get("expected", {})
    counterparty = expected.get("Q5_counterparty") or driver.default_counterparty()
    queries = driver.logical_queries(counterparty)
    adapter = driver.TallyAdapter(
        server.base_url, tenant["key"], tenant["workspace_id"], resource_id
    )
    headers = {"Accept": "application/json", "Accept-Encoding": "gzip", **adapter.client_headers()}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    # Wakes the process and its connection pool up; an unfiltered count is never memoised.
    _get(conn, f"/api/v1/resources/{resource_id}/data?page_size=1", headers)
    out: dict[str, dict[str, Any]] = {}
    for attempt in ("first", "second"):
        for name in FIRST_REQUEST_QUERIES:
            q = queries[name]
            req = asyncio.run(adapter.build(None, q))
            cpu0 = procs.tree_cpu_seconds(server.pids)
            status, body, elapsed = _get(conn, req.path, headers)
            cpu = procs.tree_cpu_seconds(server.pids) - cpu0
            rec = out.setdefault(name, {"query": name, "url": req.display})
            rec.update(
                {
                    f"{attempt}_ms": round(elapsed * 1000, 1),
                    f"{attempt}_status": status,
                    f"{attempt}_server_cpu_ms": round(cpu * 1000),
                }
            )
            if status == 200 and attempt == "first":
                page = adapter.parse(json.loads(body))
                rec["total_count"] = page.total_count
                rec["checks"] = driver.validate(q, page, expected, counterparty)
                rec["valid"] = not any(c.startswith("FAIL") for c in rec["checks"])
    conn.close()
    return list(out.values())


def run_driver(
    cfg: Config,
    server: Server,
    tenant: dict[str, Any],
    resource_id: int,
    *,
    label: str,
    version: str,
) -> int:
    database = (
        "CPU includes the PostgreSQL server's processes"
        if "postgresql" in label
        else "SQLite runs inside tally's process"
    )
    note = (
        f"tally serve, TALLY_RESPONSE_CACHE=false, {cfg.tally_workers} API process(es), each "
        f"with {os.cpu_count()} query processes (the default, one per CPU); {database}"
    )
    cmd = [
        str(cfg.venv / "bin" / "python"),
        str(cfg.kit / "data_api_bench.py"),
        "run",
        "--target",
        "tally",
        "--base-url",
        server.base_url,
        "--api-key",
        tenant["key"],
        "--workspace-id",
        str(tenant["workspace_id"]),
        "--resource-id",
        str(resource_id),
        "--meta",
        str(cfg.meta),
        "--concurrency",
        str(cfg.concurrency),
        "--duration",
        str(cfg.duration),
        "--warmup",
        str(cfg.warmup),
        "--engine",
        cfg.engine,
        "--label",
        label,
        "--target-version",
        version,
        "--note",
        note,
        "--out",
        str(cfg.results / f"bench-{label}"),
    ]
    for pid in server.pids:
        cmd += ["--server-pid", str(pid)]
    log(f"driver: {label} (Q1-Q6, concurrency {cfg.concurrency}, {cfg.duration:g} s each)")
    proc = procs.spawn(
        cmd,
        env=cfg.kit_env(),
        cwd=REPO,
        stdout=cfg.logs / f"driver-{label}.md",
        log_path=cfg.logs / f"driver-{label}.log",
    )
    return procs.wait(proc, DRIVER_TIMEOUT_SECONDS)


# --- one backend, start to finish -------------------------------------------------------


def tally_cli(args: list[str], env: dict[str, str], log_path: Path) -> dict[str, Any]:
    """One `tally admin ...` command; it prints one JSON object."""
    out = subprocess.run(
        [str(TALLY), *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    with open(log_path, "a") as f:
        f.write(f"$ tally {' '.join(args)}\n{out.stderr}{out.stdout}\n")
    if out.returncode != 0:
        raise RuntimeError(
            f"tally {' '.join(args)} exited {out.returncode}: "
            f"{out.stdout.strip()} {out.stderr.strip()[-500:]}"
        )
    parsed: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return parsed


def make_tenant(env: dict[str, str], log_path: Path) -> dict[str, Any]:
    account = tally_cli(["admin", "create-account", "--name", "bench"], env, log_path)
    workspace = tally_cli(
        ["admin", "create-workspace", "--account", str(account["id"]), "--name", "bench"],
        env,
        log_path,
    )
    t = time.perf_counter()
    key = tally_cli(["admin", "create-key", "--workspace", str(workspace["id"])], env, log_path)
    return {
        "key": key["key"],
        "workspace_id": workspace["id"],
        "cli_start_s": round(time.perf_counter() - t, 3),
    }


def tally_env(cfg: Config, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    env.update(
        TALLY_HOME=str(home),
        TALLY_RESPONSE_CACHE="false",
        TALLY_WEB_CONCURRENCY=str(cfg.tally_workers),
    )
    return env


def _measure(
    cfg: Config,
    backend: str,
    env: dict[str, str],
    home: Path,
    db_pids: list[int],
    driver: ModuleType,
    versions: dict[str, Any],
    rec: dict[str, Any],
) -> None:
    tenant = make_tenant(env, cfg.logs / f"tally-{backend}-admin.log")
    rec["cli_start_s"] = tenant["cli_start_s"]
    workspace = tenant["workspace_id"]
    log(f"{backend}: tally admin load ({cfg.rows:,} rows)")
    rec["load"] = timed_load(
        cfg, env, home=home, workspace=workspace, name="transactions", csv=cfg.csv, db_pids=db_pids
    )
    log(
        f"{backend}: loaded in {rec['load']['seconds']} s, rows readable at "
        f"{rec['load']['rows_readable_s']} s"
    )
    for part, divisor in PARTS:  # is memory constant as the file grows?
        head = head_of(cfg.csv, max(1, cfg.rows // divisor), home)
        rec[f"load_{part}"] = timed_load(
            cfg,
            env,
            home=home,
            workspace=workspace,
            name=f"transactions_{part}",
            csv=head,
            db_pids=db_pids,
        )
        head.unlink()
    if "TALLY_DATABASE_URL" in env:
        rec["vacuum_s"] = vacuum(env["TALLY_DATABASE_URL"])
    started = time.perf_counter()
    server = start_server(cfg, env, db_pids)
    try:
        rec["worker_indexes"] = wait_for_indexes(home, env.get("TALLY_DATABASE_URL"), started)
        log(f"{backend}: the worker built the indexes {rec['worker_indexes']}")
        resource_id = rec["load"]["resource_id"]
        rec["first_requests"] = first_requests(cfg, server, tenant, resource_id, driver)
        rec["snapshots"] = wait_for_snapshots(server.log_path)
        log(f"{backend}: the column snapshots the first requests started {rec['snapshots']}")
        database = (
            f"SQLite {versions['sqlite']}"
            if backend == "sqlite"
            else f"PostgreSQL {rec['postgres']['server_version']}"
        )
        version = f"tally {versions['tally']} ({versions['tally_git_sha'][:12]}), {database}"
        rec["driver_exit"] = run_driver(
            cfg, server, tenant, resource_id, label=rec["label"], version=version
        )
    finally:
        procs.stop(server.proc)


@dataclass
class Home:
    """A fresh TALLY_HOME and, on PostgreSQL, its cluster's postmaster (`db_pids`)."""

    backend: str
    path: Path
    env: dict[str, str]
    db_pids: list[int] = field(default_factory=list)

    @property
    def url(self) -> str | None:
        return self.env.get("TALLY_DATABASE_URL")


@contextmanager
def fresh_home(cfg: Config, backend: str, rec: dict[str, Any], purpose: str) -> Iterator[Home]:
    """A temp TALLY_HOME; on PostgreSQL also a throwaway cluster with the server's default
    durability (durable_pg.py) and a fresh database, its settings in `rec["postgres"]`.
    Everything is removed afterwards."""
    home = Home(backend, Path(tempfile.mkdtemp(prefix=f"tally-{purpose}-{backend}-")), {})
    pg = None
    try:
        home.env = tally_env(cfg, home.path)
        if backend == "postgresql":
            pg = start_durable_postgres()
            home.env["TALLY_DATABASE_URL"] = create_database(pg, "tally_bench")
            rec["postgres"] = postgres_facts(pg)
            home.db_pids = [rec["postgres"]["postmaster_pid"]]
        yield home
    finally:
        if pg is not None:
            pg.stop()
            procs.postgres_servers.remove(pg)
        shutil.rmtree(home.path, ignore_errors=True)


def loaded_tenant(cfg: Config, home: Home, rec: dict[str, Any]) -> dict[str, Any]:
    """A workspace and key (`make_tenant`) and the benchmark's rows loaded into it as the
    source `transactions` (`rec["load"]`, timed); on PostgreSQL then `VACUUM (ANALYZE)`
    (`rec["vacuum_s"]`), as autovacuum would soon after."""
    tenant = make_tenant(home.env, cfg.logs / f"tally-{home.backend}-admin.log")
    log(f"{home.backend}: tally admin load ({cfg.rows:,} rows)")
    rec["load"] = timed_load(
        cfg,
        home.env,
        home=home.path,
        workspace=tenant["workspace_id"],
        name="transactions",
        csv=cfg.csv,
        db_pids=home.db_pids,
    )
    if home.url is not None:
        rec["vacuum_s"] = vacuum(home.url)
    return tenant


def run_backend(
    cfg: Config,
    backend: str,
    driver: ModuleType,
    versions: dict[str, Any],
) -> dict[str, Any]:
    """Everything for one backend; a failure is recorded, and the run goes on."""
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}"}
    try:
        with fresh_home(cfg, backend, rec, "bench") as home:
            _measure(cfg, backend, home.env, home.path, home.db_pids, driver, versions, rec)
    except Exception as error:  # recorded in the report; the other targets still run
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    return rec


def ingest_line(rec: dict[str, Any]) -> dict[str, Any] | None:
    """tally's load as a line of the kit's ingest.jsonl, so the kit's report shows it."""
    load = rec.get("load")
    if not load:
        return None
    return {
        "system": f"tally ({rec['backend']})",
        "method": "tally admin load (new source: rows committed and readable; its indexes "
        "are built afterwards by a worker)",
        "rows": load["rows"],
        "csv_bytes": load["csv_bytes"],
        "seconds": load["seconds"],
        "ok": True,
        "note": (
            f"rows readable at {load['rows_readable_s']} s; peak RSS "
            f"{load['peak_rss_mb']} MB; process start-up ~{rec.get('cli_start_s')} s"
        ),
    }
