"""Queries for the history of a derived resource's runs: one row per finished run
(succeeded or failed), the last `keep` of each derived resource, written in the
transaction that records the run's end (records.py keeps only the last run's details)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from tally.core.clock import as_utc
from tally.core.derived_runs import DerivedRun
from tally.storage.schema import derived_runs


def insert_run(
    conn: Connection,
    derived_id: int,
    *,
    started_at: dt.datetime,
    finished_at: dt.datetime,
    outcome: str,
    rows: int | None = None,
    error: str | None = None,
    keep: int,
) -> None:
    """The finished run, and the derived resource's runs older than its last `keep`
    removed."""
    c = derived_runs.c
    conn.execute(
        insert(derived_runs).values(
            derived_id=derived_id,
            started_at=started_at,
            finished_at=finished_at,
            outcome=outcome,
            rows=rows,
            error=error,
        )
    )
    oldest_kept = (
        select(c.id)
        .where(c.derived_id == derived_id)
        .order_by(c.id.desc())
        .offset(keep - 1)
        .limit(1)
        .scalar_subquery()
    )
    conn.execute(delete(derived_runs).where(c.derived_id == derived_id, c.id < oldest_kept))


def list_runs(conn: Connection, derived_id: int) -> list[DerivedRun]:
    """The derived resource's runs, newest first."""
    c = derived_runs.c
    rows = conn.execute(
        select(derived_runs).where(c.derived_id == derived_id).order_by(c.id.desc())
    )
    return [_run_of(r) for r in rows]


def delete_runs(conn: Connection, derived_id: int) -> None:
    conn.execute(delete(derived_runs).where(derived_runs.c.derived_id == derived_id))


def _run_of(row: Any) -> DerivedRun:
    return DerivedRun(
        id=row.id,
        started_at=as_utc(row.started_at),
        finished_at=as_utc(row.finished_at),
        outcome=row.outcome,
        rows=None if row.rows is None else int(row.rows),
        error=row.error,
    )
