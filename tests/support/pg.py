"""A throwaway PostgreSQL server from the installed binaries, on a loopback port.

initdb refuses to run as root, so as root the server runs as the `postgres` system
user (created by Debian's package). The cluster lives in a temporary folder and is
removed on stop. Durability is switched off: these clusters hold test data only.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from support.servers import free_port
from support.waiting import eventually

START_TIMEOUT_SECONDS = 30
SUPERUSER = "postgres"


def find_bindir() -> Path:
    """The folder holding initdb and pg_ctl: pg_config's answer, else Debian's layout."""
    if pg_config := shutil.which("pg_config"):
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")
    return Path(found[-1]).parent


@dataclass
class PostgresServer:
    port: int
    folder: Path
    bindir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        _run_as_owner(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.folder / "data"),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            check=False,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def _run_as_owner(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", SUPERUSER, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def start_postgres() -> PostgresServer:
    bindir = find_bindir()
    folder = Path(tempfile.mkdtemp(prefix="tally-pg-"))
    data = folder / "data"
    if os.geteuid() == 0:
        owner = pwd.getpwnam(SUPERUSER)
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    _run_as_owner(
        [
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ]
    )
    port = free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories='' "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        "-c max_connections=200 -c shared_buffers=256MB"
    )
    _run_as_owner(
        [
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(folder / "log"),
            "-w",
            "-t",
            str(START_TIMEOUT_SECONDS),
            "start",
        ]
    )
    server = PostgresServer(port, folder, bindir)
    _wait_ready(server)
    return server


def _wait_ready(server: PostgresServer) -> None:
    import psycopg

    errors: list[psycopg.OperationalError] = []

    def accepting() -> bool:
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
        except psycopg.OperationalError as error:
            errors.append(error)
            return False
        return True

    eventually(
        accepting,
        timeout=START_TIMEOUT_SECONDS,
        what=f"PostgreSQL on port {server.port}",
        explain=lambda: f"last error: {errors[-1] if errors else None}",
    )


def create_database(server: PostgresServer, name: str, template: str | None = None) -> str:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        clause = f" TEMPLATE {template}" if template else ""
        conn.execute(f"CREATE DATABASE {name}{clause}")  # type: ignore[arg-type]
    return server.url(name)
