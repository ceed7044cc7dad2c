"""The history of a derived resource's runs: each run that finished, succeeded or failed,
kept in the transaction that records its end; the last RUNS_KEPT of each."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Connection

from tally.core.derived_runs import FAILED, SUCCEEDED
from tally.storage.derived import runs as run_history

RUNS_KEPT = 50  # per derived resource: one run per burst of deliveries would grow forever


def record_succeeded(
    conn: Connection, derived_id: int, *, started: dt.datetime, now: dt.datetime, rows: int
) -> None:
    run_history.insert_run(
        conn,
        derived_id,
        started_at=started,
        finished_at=now,
        outcome=SUCCEEDED,
        rows=rows,
        keep=RUNS_KEPT,
    )


def record_failed(
    conn: Connection, derived_id: int, *, started: dt.datetime, now: dt.datetime, error: str
) -> None:
    run_history.insert_run(
        conn,
        derived_id,
        started_at=started,
        finished_at=now,
        outcome=FAILED,
        error=error,
        keep=RUNS_KEPT,
    )
