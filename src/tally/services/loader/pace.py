"""PostgreSQL's COPY kept level with the loader's checks (decision 0018's addendum).

On PostgreSQL a file's bytes are COPYed in a thread while the loader's first pass checks
them. COPY's work is the server's, in a backend whose CPU priority tally cannot lower,
so on a busy machine it took a core from the API however nice the worker was. Sent no
further ahead of the checks than a few batches, COPY goes at their pace, and the checks
run at the worker's niceness: requests first, loads after, as on SQLite. On an idle
machine the two ran side by side anyway, and the load still waits for both.

Hand-written: it is the hand-off between tally's two halves of a load, not a general
rate limiter (a token bucket would pace by time, not by the checks' progress).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

# How many lines COPY may be sent ahead of the lines the checks have passed: a few of
# the reader's batches (10,000 rows each), so neither half waits for the other when the
# machine is idle.
LEAD_LINES = 50_000


class CopyPace:
    """Lines the checks have passed, and COPY's chunks held back until they pass them.
    `finish` (when the checks end, however) lets every chunk go."""

    def __init__(self, lead_lines: int = LEAD_LINES) -> None:
        self._lead = lead_lines
        self._checked = 0
        self._finished = False
        self._changed = threading.Condition()

    def checked(self, line: int) -> None:
        """The checks have passed the file's first `line` lines."""
        with self._changed:
            self._checked = max(self._checked, line)
            self._changed.notify_all()

    def finish(self) -> None:
        with self._changed:
            self._finished = True
            self._changed.notify_all()

    def paced(self, chunks: Iterator[bytes]) -> Iterator[bytes]:
        """`chunks` (the file's text, header line included), each when the checks are
        near enough: its lines at most `lead_lines` past theirs."""
        sent = 0
        for chunk in chunks:
            sent += chunk.count(b"\n")
            with self._changed:
                self._changed.wait_for(
                    lambda sent=sent: self._finished or sent - self._checked <= self._lead
                )
            yield chunk
