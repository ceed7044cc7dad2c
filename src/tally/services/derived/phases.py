"""The phases of a derived run, as GET of a reconciliation or a transformation shows
them: what a run under way is doing and since when (`run`), and the seconds each phase
took in the last run (`last_run.phases`).

A phase is the users' name for one or more of the engine's steps (`PHASE_OF`, in the
order a run meets them; docs/reconciliation.md says what each one is). `Steps` times
the steps; entering a step of another phase writes that phase on the run's record in a
short transaction of its own (storage/derived/records.py `record_phase`), once per
phase, never per row; so it must not be entered while the run holds a transaction that
renews its lease (on PostgreSQL that one locks the record until it commits).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tally.storage.derived.records import DerivedRecord

STARTING = "starting"  # claimed: what a run that was interrupted left is cleared
STALLED = "stalled"  # shown, never written: the run's worker stopped renewing its lease
PHASE_OF = {
    "clear": STARTING,
    "read": "reading",  # both inputs, in one snapshot (incremental: the last run's basis)
    "incremental": "matching",  # the new rows, the rows they reach, matched again
    "match": "matching",
    "digest": "matching",  # the content's digest, the figures of last_run
    "query": "querying",  # a transformation's SQL, its rows written beside the output
    "build": "writing",  # the output written beside the published one, unreadable yet
    "stage": "writing",  # an incremental run's changed rows
    "publish": "publishing",  # swapped in (or patched in place): readable from its end
    "finish": "indexing",  # its rows' JSON text, indexes; the table it replaced dropped
    "companion": "indexing",  # a reconciliation's key table, for the next run
}
PHASES = tuple(dict.fromkeys((STARTING, *PHASE_OF.values(), STALLED)))


class Steps:
    """A run's steps, timed one after the other (`begin` ends the one before); the
    first step of another phase calls `entered(phase)`, which publishes it."""

    def __init__(self, entered: Callable[[str], None]) -> None:
        self.seconds: dict[str, float] = {}  # per step, for the worker's log
        self._entered = entered
        self._phase = STARTING  # the claim's
        self._step: str | None = None
        self._since = 0.0

    def begin(self, step: str) -> None:
        self.end()
        phase = PHASE_OF[step]
        if phase != self._phase:
            self._entered(phase)
            self._phase = phase
        self._step, self._since = step, time.perf_counter()

    def end(self) -> None:
        """The step under way ended (its seconds added to those it took before)."""
        if self._step is not None:
            spent = time.perf_counter() - self._since
            self.seconds[self._step] = self.seconds.get(self._step, 0.0) + spent
            self._step = None

    def phases(self) -> dict[str, float]:
        """Seconds per phase, in the order the run entered them, to the millisecond."""
        split: dict[str, float] = {}
        for step, seconds in self.seconds.items():
            phase = PHASE_OF[step]
            split[phase] = split.get(phase, 0.0) + seconds
        return {phase: round(seconds, 3) for phase, seconds in split.items()}


@dataclass(frozen=True)
class RunUnderWay:
    """What GET shows of a run under way: since `started_at` (its claim), in `phase`
    since `phase_since`; `stalled` since its lease expired when its worker stopped."""

    phase: str
    phase_since: dt.datetime
    started_at: dt.datetime

    @classmethod
    def of(cls, record: DerivedRecord, now: dt.datetime) -> RunUnderWay | None:
        """None when no run is under way (or it was claimed by a process that kept no
        phase)."""
        phase, since, started = record.run_phase, record.run_phase_since, record.run_started_at
        if record.state != "running" or phase is None or since is None or started is None:
            return None
        expires = record.lease_expires_at
        if expires is not None and expires < now:  # until another worker takes it up
            return cls(STALLED, expires, started)
        return cls(phase, since, started)

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "phase_since": self.phase_since.isoformat(),
            "started_at": self.started_at.isoformat(),
        }
