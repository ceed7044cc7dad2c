"""`lower_cpu_priority` in fresh child processes (a niceness cannot be taken back)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A thread started before the call and one after; each reports its niceness.
PROBE = (
    "import os, threading\n"
    "from tally.processes.priority import lower_cpu_priority\n"
    "seen, called = [], threading.Event()\n"
    "def report():\n"
    "    called.wait(); seen.append(os.getpriority(os.PRIO_PROCESS, 0))\n"
    "before = threading.Thread(target=report); before.start()\n"
    "got = lower_cpu_priority({asked}); called.set(); before.join()\n"
    "after = threading.Thread(target=report); after.start(); after.join()\n"
    "print(got, *seen)\n"
)


def niceness_in_child(asked: int, started_at: int) -> list[int]:
    """What `lower_cpu_priority(asked)` returns in a child started `started_at` nicer
    than this process, and what a thread started before it and one after run at."""
    out = subprocess.run(
        ["nice", "-n", str(started_at), sys.executable, "-c", PROBE.format(asked=asked)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    return [int(value) for value in out]


@pytest.mark.parametrize(("asked", "started_at"), [(10, 0), (0, 0), (10, 15), (19, 3)])
def test_threads_are_reniced_never_lowered_and_new_ones_inherit(
    asked: int, started_at: int
) -> None:
    started = min(os.getpriority(os.PRIO_PROCESS, 0) + started_at, 19)
    expected = max(asked, started)

    assert niceness_in_child(asked, started_at) == [expected] * 3
