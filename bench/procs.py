"""The benchmark's child processes: started here, remembered, and stopped by PID.

Also the /proc readers the benchmark needs (CPU of a process tree, reaped children
included) and a free loopback port.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from support.pg import PostgresServer

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

children: list[subprocess.Popen[bytes]] = []
postgres_servers: list[PostgresServer] = []


def log(message: str) -> None:
    print(f"[bench {dt.datetime.now(dt.UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def spawn(
    cmd: list[str], *, env: dict[str, str], cwd: Path, log_path: Path, stdout: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start `cmd` with stderr (and stdout, unless `stdout` names a file) in `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as err, open(stdout or log_path, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, cwd=cwd)
    children.append(proc)
    return proc


def forget(proc: subprocess.Popen[bytes]) -> None:
    if proc in children:
        children.remove(proc)


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
    forget(proc)


def wait(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The exit code, or -1 after stopping a child that outlived `timeout`."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"pid {proc.pid} still running after {timeout:.0f} s: stopping it")
        stop(proc)
        return -1
    finally:
        forget(proc)


def stop_everything() -> None:
    for proc in list(reversed(children)):
        stop(proc)
    for server in list(postgres_servers):
        server.stop()
        postgres_servers.remove(server)


def raise_on_signal(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP become SystemExit, so every `finally` stops what it started."""
    raise SystemExit(128 + signum)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU time of `roots` and their descendants, including children they have already
    reaped (cutime/cstime): a PostgreSQL backend that exits keeps counting."""
    parents: dict[int, int] = {}
    fields: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (f := _stat_fields(int(entry))) is not None:
            parents[int(entry)], fields[int(entry)] = int(f[1]), f
    todo, total = [p for p in roots if p in fields], 0.0
    while todo:
        pid = todo.pop()
        utime, stime, cutime, cstime = (int(x) for x in fields[pid][11:15])
        total += (utime + stime + cutime + cstime) / CLOCK_TICKS
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return total
