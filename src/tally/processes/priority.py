"""CPU priority of tally's background processes (decision 0018)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

THREADS = Path("/proc/self/task")


def lower_cpu_priority(niceness: int) -> int:
    """Run every thread of this process at `niceness` at least (`nice`, 0-19), and
    return the niceness the calling thread runs at.

    On Linux a niceness belongs to a thread, and new threads inherit their creator's:
    so each thread there already (numpy's OpenBLAS starts its pool at import) is
    reniced, and threads started later follow. A thread started nicer than asked keeps
    its own (raising priority back needs privileges, and whoever started it so meant
    it). A busy machine then gives the API its CPU before a load or a run (measured in
    docs/benchmarks.md, "Accepting while a file loads")."""
    threads = [int(task.name) for task in THREADS.iterdir()] if THREADS.is_dir() else [0]
    for thread in threads:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            if niceness > os.getpriority(os.PRIO_PROCESS, thread):
                os.setpriority(os.PRIO_PROCESS, thread, niceness)
    return os.getpriority(os.PRIO_PROCESS, 0)
