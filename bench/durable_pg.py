"""A throwaway PostgreSQL cluster with the server's default durability, for tally's
benchmark: tests/support/pg.py's cluster, restarted without its test-only speed-ups
so that fsync, synchronous_commit and full_page_writes are on, as in production."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

import procs

from support.pg import PostgresServer, start_postgres


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

    names = ["server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_level"]
    names += ["shared_buffers", "max_wal_size", "autovacuum"]
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
