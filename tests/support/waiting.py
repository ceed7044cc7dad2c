"""`eventually`: the one way tests wait for something that happens in another thread or
process (a server started, a file delivered, a client gone).

A test never sleeps a fixed time and never asserts how long something took: on a loaded
machine both fail (or pass) for the wrong reason. It waits, with a generous deadline,
for the behaviour itself, and says on time-out what it waited for and what it saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    explain: Callable[[], str] | None = None,
) -> T:
    """Call `probe` until it returns something truthy (returned) or `timeout` passes.

    An exception from `probe` ends the wait at once (a crashed process); `explain()`
    adds to the time-out message what the test can see now."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{detail}")
        time.sleep(interval)
