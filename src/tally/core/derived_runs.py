"""A finished run of a derived resource (reconciliation, transformation), as its history
keeps it (storage/derived/runs.py) and the API and the console show it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

SUCCEEDED = "succeeded"
FAILED = "failed"


@dataclass(frozen=True)
class DerivedRun:
    id: int
    started_at: dt.datetime
    finished_at: dt.datetime
    outcome: str  # succeeded | failed
    rows: int | None  # the output's, after a run that succeeded
    error: str | None  # a failed run's, in full

    @property
    def seconds(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat(),
            "outcome": self.outcome,
            "rows": self.rows,
            "error": self.error,
        }
