"""A load's raw stream held to a rate while the API is accepting notifications
(decision 0022).

On PostgreSQL a load's COPY writes the server's one write-ahead log at ~80 MB/s, and
every commit of the API's intake waits until the log is on disk up to its own record:
COPY's megabytes included, with a new 16 MB segment file created (zero-filled and
fsynced) every fifth of a second on a new server. Held to a few MB/s while files are
being queued, COPY leaves those commits short; the rest of the time it runs at full
speed. PostgreSQL's own cost-based vacuum delay makes the same trade for its
background work. This is tally's own: a rate limit that only applies while another
process's work is seen, which no rate-limiting library offers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

# Files queued within this many seconds mean the intake is busy.
BUSY_SECONDS = 1.0


class LoadPace:
    """One worker process's loads together, paced at `bytes_per_second` while files
    were queued (by any process) within BUSY_SECONDS; unpaced otherwise. A rate of 0
    never paces. `files_queued` is called by the worker's listener thread, `paced`
    iterated by each load's COPY thread."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._rate = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._queued_at = -BUSY_SECONDS  # a clock reading: when files were last queued
        self._free_at = 0.0  # when the paced loads may send their next bytes

    def files_queued(self) -> None:
        self._queued_at = self._clock()

    def paced(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """`chunks` as they are, each once the bytes sent before it allow."""
        for chunk in chunks:
            if delay := self._delay_before(len(chunk)):
                self._sleep(delay)
            yield chunk

    def _delay_before(self, size: int) -> float:
        """Seconds to wait before sending `size` bytes: until the bytes sent while busy
        have had their time at the rate (shared by every load of the process, so two
        loads together keep it). Time spent reading the file counts towards it."""
        now = self._clock()
        if self._rate <= 0 or now - self._queued_at >= BUSY_SECONDS:
            return 0.0
        with self._lock:
            start = max(self._free_at, now)
            self._free_at = start + size / self._rate
            return start - now
