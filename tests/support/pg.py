"""A throwaway PostgreSQL server from the installed binaries, on a loopback port.

initdb refuses to run as root, so as root the server runs as the `postgres` system
user (created by Debian's package). The cluster lives in a temporary folder and is
removed on stop. Durability is switched off: these clusters hold test data only.

A killed test run never stops its cluster: each folder names its owner (the test
process's pid and start time, `OWNER_FILE`), and `reap_orphans`, at a session's start,
stops and removes the clusters whose owner is gone. Only those: a folder without an
owner file (being made, or made before owners were written) or whose owner lives (as
the same process: a pid used again by another is no owner) is left alone.
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
PREFIX = "tally-pg-"
OWNER_FILE = "owner"  # "<pid> <start time>" of the test process that made the cluster


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
        _stop_and_remove(self.bindir, self.folder)


def _stop_and_remove(bindir: Path, folder: Path) -> None:
    data = str(folder / "data")
    _run_as_owner(
        [str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"], check=False
    )
    shutil.rmtree(folder, ignore_errors=True)


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks after boot, /proc/<pid>/stat's 22nd field):
    with its pid, it names one process; None when no process has the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # fields after the command's ")" start at 3


def _owner_gone(folder: Path) -> bool:
    """Provably an orphan: its owner file names a process that no longer runs."""
    try:
        pid_text, started = (folder / OWNER_FILE).read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return False  # no owner named (yet): not provably anyone's orphan
    return _started(pid) != started


def reap_orphans(base: Path | None = None) -> list[Path]:
    """Stop and remove the clusters under `base` (the temporary folder) whose test
    process is gone; the folders removed."""
    base = base or Path(tempfile.gettempdir())
    orphans = [f for f in sorted(base.glob(PREFIX + "*")) if f.is_dir() and _owner_gone(f)]
    if orphans:
        bindir = find_bindir()
        for folder in orphans:
            _stop_and_remove(bindir, folder)
    return orphans


def _run_as_owner(cmd: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", SUPERUSER, "--", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def start_postgres(base: Path | None = None) -> PostgresServer:
    """A cluster in a new folder under `base` (the temporary folder), owned by this
    process (`reap_orphans`)."""
    bindir = find_bindir()
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))
    (folder / OWNER_FILE).write_text(f"{os.getpid()} {_started(os.getpid())}\n")
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
