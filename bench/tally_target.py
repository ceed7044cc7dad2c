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
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import procs
from procs import log

from support.pg import PostgresServer, create_database, start_postgres

if TYPE_CHECKING:
    from run import Config

REPO = Path(__file__).resolve().parent.parent
TALLY = REPO / ".venv" / "bin" / "tally"
SERVER_START_SECONDS = 60
DRIVER_TIMEOUT_SECONDS = 1800
POLL_SECONDS = 0.05
FIRST_REQUEST_QUERIES = ("Q2", "Q3", "Q5")


# --- PostgreSQL with the server's default durability ----------------------------------


def _as_owner(cmd: list[str]) -> None:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)


def start_durable_postgres() -> PostgresServer:
    """tests/support/pg.py's throwaway cluster, restarted without its test-only options
    (fsync, synchronous_commit and full_page_writes off, bigger buffers): the server's
    defaults, as in the kit's COPY anchor. Command-line options outrank ALTER SYSTEM,
    hence a restart with new options rather than a reload."""
    server = start_postgres()
    procs.postgres_servers.append(server)
    data, pg_ctl = server.folder / "data", str(server.bindir / "pg_ctl")
    _as_owner([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"])
    options = f"-c listen_addresses=127.0.0.1 -c port={server.port} -c unix_socket_directories=''"
    logfile = str(server.folder / "log")
    _as_owner([pg_ctl, "-D", str(data), "-o", options, "-l", logfile, "-w", "-t", "60", "start"])
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

    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_level")
    names += ("shared_buffers", "max_wal_size", "autovacuum")
    with psycopg.connect(server.url(), autocommit=True) as conn:
        facts: dict[str, Any] = {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}  # type: ignore[index]
    pid_file = server.folder / "data" / "postmaster.pid"
    facts["postmaster_pid"] = int(pid_file.read_text().split()[0])
    return facts


def vacuum(url: str) -> float:
    """What autovacuum does within a minute of a load, done before the timed windows so
    that it does not run inside them."""
    import psycopg

    t = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE)")
    return round(time.perf_counter() - t, 3)


# --- loading --------------------------------------------------------------------------


class CatalogueWatch(threading.Thread):
    """Reads the resource's catalogue row while a load runs: when its rows were
    committed (row_count > 0) and when its indexes were built (indexed_version)."""

    def __init__(self, home: Path, url: str | None, name: str) -> None:
        super().__init__(daemon=True)
        self.home, self.url, self.name = home, url, name
        self.t0 = time.perf_counter()
        self.rows_at: float | None = None
        self.indexed_at: float | None = None
        self._done = threading.Event()

    def _connect(self) -> Any:
        if self.url is None:
            uri = f"file:{self.home / 'tally.db'}?mode=ro"
            return sqlite3.connect(uri, uri=True, timeout=1, isolation_level=None)
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def _read(self, conn: Any) -> tuple[int, int, int] | None:
        mark = "?" if self.url is None else "%s"
        sql = f"SELECT row_count, data_version, indexed_version FROM resources WHERE name = {mark}"
        row = conn.execute(sql, (self.name,)).fetchone()
        return None if row is None else (int(row[0]), int(row[1]), int(row[2]))

    def run(self) -> None:
        conn = None
        while not self._done.is_set():
            try:
                conn = conn or self._connect()
                state = self._read(conn)
            except Exception:  # busy, or not there yet: look again
                state = None
            now = time.perf_counter() - self.t0
            if state and state[0] > 0 and self.rows_at is None:
                self.rows_at = now
            if state and 0 < state[2] == state[1]:
                self.indexed_at = now
                break
            self._done.wait(POLL_SECONDS)
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
    watch = CatalogueWatch(home, env.get("TALLY_DATABASE_URL"), name)
    db_cpu0 = procs.tree_cpu_seconds(db_pids)
    watch.start()
    try:
        t0 = time.perf_counter()
        cmd = [str(TALLY), "admin", "load", "--workspace", str(workspace), "--name", name]
        proc = procs.spawn(
            [*cmd, str(csv)],
            env=env,
            cwd=REPO,
            stdout=stdout,
            log_path=cfg.logs / f"{cfg_label(env)}-load.log",
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        procs.forget(proc)
    finally:
        watch.finish()
    output = stdout.read_text().strip()
    stdout.unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"tally admin load failed ({proc.returncode}): {output[-500:]}")
    loaded = json.loads(output.splitlines()[-1])
    rounded = lambda v: None if v is None else round(v, 3)  # noqa: E731
    return {
        "csv": str(csv),
        "csv_bytes": csv.stat().st_size,
        "resource_id": loaded["id"],
        "rows": loaded["rows"],
        "seconds": round(seconds, 3),
        "rows_readable_s": rounded(watch.rows_at),
        "indexes_built_s": rounded(watch.indexed_at),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "db_server_cpu_s": round(procs.tree_cpu_seconds(db_pids) - db_cpu0, 3) if db_pids else None,
        "poll_interval_s": POLL_SECONDS,
    }


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

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_server(cfg: Config, env: dict[str, str], db_pids: list[int]) -> Server:
    port = procs.free_port()
    cmd = [str(TALLY), "serve", "--host", "127.0.0.1", "--port", str(port)]
    proc = procs.spawn(
        [*cmd, "--workers", str(cfg.tally_workers)],
        env=env,
        cwd=REPO,
        log_path=cfg.logs / f"{cfg_label(env)}-serve.log",
    )
    deadline = time.monotonic() + SERVER_START_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return Server(proc, port, [proc.pid, *db_pids])
        except (OSError, http.client.HTTPException):
            time.sleep(0.1)
        finally:
            conn.close()
    procs.stop(proc)
    raise RuntimeError(f"tally serve did not answer /health; see {cfg.logs}")


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
        f"tally serve, TALLY_RESPONSE_CACHE=false, {cfg.tally_workers} API process(es); {database}"
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
    tenth = head_of(cfg.csv, max(1, cfg.rows // 10), home)
    rec["load_tenth"] = timed_load(
        cfg,
        env,
        home=home,
        workspace=workspace,
        name="transactions_tenth",
        csv=tenth,
        db_pids=db_pids,
    )
    if "TALLY_DATABASE_URL" in env:
        rec["vacuum_s"] = vacuum(env["TALLY_DATABASE_URL"])
    server = start_server(cfg, env, db_pids)
    try:
        resource_id = rec["load"]["resource_id"]
        rec["first_requests"] = first_requests(cfg, server, tenant, resource_id, driver)
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


def run_backend(
    cfg: Config,
    backend: str,
    driver: ModuleType,
    versions: dict[str, Any],
) -> dict[str, Any]:
    """Everything for one backend; a failure is recorded, and the run goes on."""
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}"}
    home = Path(tempfile.mkdtemp(prefix=f"tally-bench-{backend}-"))
    pg: PostgresServer | None = None
    try:
        env = tally_env(cfg, home)
        db_pids: list[int] = []
        if backend == "postgresql":
            log("postgresql: starting a throwaway cluster (default durability)")
            pg = start_durable_postgres()
            env["TALLY_DATABASE_URL"] = create_database(pg, "tally_bench")
            rec["postgres"] = postgres_facts(pg)
            db_pids = [rec["postgres"]["postmaster_pid"]]
        _measure(cfg, backend, env, home, db_pids, driver, versions, rec)
    except Exception as error:  # recorded in the report; the other targets still run
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    finally:
        if pg is not None:
            pg.stop()
            procs.postgres_servers.remove(pg)
        shutil.rmtree(home, ignore_errors=True)
    return rec


def ingest_line(rec: dict[str, Any]) -> dict[str, Any] | None:
    """tally's load as a line of the kit's ingest.jsonl, so the kit's report shows it."""
    load = rec.get("load")
    if not load:
        return None
    return {
        "system": f"tally ({rec['backend']})",
        "method": "tally admin load (new source: rows committed, then indexes built)",
        "rows": load["rows"],
        "csv_bytes": load["csv_bytes"],
        "seconds": load["seconds"],
        "ok": True,
        "note": (
            f"rows readable at {load['rows_readable_s']} s; peak RSS "
            f"{load['peak_rss_mb']} MB; process start-up ~{rec.get('cli_start_s')} s"
        ),
    }
