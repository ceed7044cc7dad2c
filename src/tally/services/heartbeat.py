"""A lease renewed in the background while its job works (files, derived runs): a
killed worker stops renewing, and its job is claimed again once the lease expires."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any


class Heartbeat:
    """Calls `renew` every third of `lease_seconds` on a thread of its own, from entering
    the `with` block until leaving it. A renewal that answers False (the lease is
    another worker's now) ends the beat: `lost` says so. One that raises is logged as
    `failure_event` (with `context`) and tried again at the next beat: a missed renewal
    only risks a retry."""

    def __init__(
        self,
        renew: Callable[[], bool],
        *,
        lease_seconds: float,
        log: logging.Logger,
        failure_event: str,
        context: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        self._renew = renew
        self._interval = lease_seconds / 3
        self._log = log
        self._failure_event = failure_event
        self._context = dict(context or {})
        self._done = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=name, daemon=True)

    @property
    def lost(self) -> bool:
        """Whether a renewal found the lease another worker's (or no one's)."""
        return self._lost.is_set()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._done.wait(self._interval):
            try:
                if not self._renew():
                    self._lost.set()
                    return
            except Exception:  # keep trying: a missed renewal only risks a retry
                self._log.exception(self._failure_event, extra=self._context)
