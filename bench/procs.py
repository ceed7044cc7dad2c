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
import time
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


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def stop(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM to the child and its descendants, each by PID, then SIGKILL to whatever
    is left after `grace` seconds. The descendants matter for the kit's bash steps: bash
    runs its cleanup trap only once its foreground command (the driver) has ended."""
    if proc.poll() is None:
        tree = {pid: _started(pid) for pid in descendants(proc.pid)}
        _signal([proc.pid, *tree], signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal([proc.pid, *descendants(proc.pid)], signal.SIGKILL)
            proc.wait()
        if tree:  # the same processes only (same start time), never a reused PID
            time.sleep(0.5)
            _signal([pid for pid, t in tree.items() if t and _started(pid) == t], signal.SIGKILL)
    forget(proc)


def _started(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]  # starttime, in clock ticks since boot


def wait(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The exit code, or -1 after stopping a child that outlived `timeout`."""
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        log(f"pid {proc.pid} still running after {timeout:.0f} s: stopping it")
        stop(proc)
        return -1
    # interrupted (SIGTERM, Ctrl-C): the child stays listed for stop_everything
    forget(proc)
    return code


def stop_children() -> None:
    for proc in list(reversed(children)):
        stop(proc)


def stop_everything() -> None:
    stop_children()
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


def _process_table() -> dict[int, list[str]]:
    table: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (f := _stat_fields(int(entry))) is not None:
            table[int(entry)] = f
    return table


def _tree(roots: list[int], table: dict[int, list[str]]) -> list[int]:
    """`roots` (those alive) and all their descendants, parents first."""
    out, todo = [], [p for p in roots if p in table]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(child for child, f in table.items() if int(f[1]) == pid)
    return out


def descendants(pid: int) -> list[int]:
    return [p for p in _tree([pid], _process_table()) if p != pid]


def tree_cpu_seconds(roots: list[int]) -> float:
    """CPU time of `roots` and their descendants, including children they have already
    reaped (cutime/cstime): a PostgreSQL backend that exits keeps counting."""
    table = _process_table()
    total = 0
    for pid in _tree(roots, table):
        utime, stime, cutime, cstime = (int(x) for x in table[pid][11:15])
        total += utime + stime + cutime + cstime
    return total / CLOCK_TICKS
