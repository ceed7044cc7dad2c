"""One lease mechanism for the queues whose rows are jobs (files, derived runs, status
notifications' deliveries; decision 0003): a table with `id`, `attempts`, `lease_owner`
and `lease_expires_at`.

A claim leases the first eligible row whose lease is free or expired, and counts an
attempt: a worker that dies stops renewing its lease (`extend`), and its job is claimed
again once the lease expires. PostgreSQL claims with FOR UPDATE SKIP LOCKED, so any
number of workers on any number of machines share a queue; SQLite has one writer at a
time (BEGIN IMMEDIATE), which makes the same statements safe there. Each queue keeps
its own eligibility and order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Table, select, update

from tally.storage.engine import backend_of


class Leases:
    """The leases of one table's rows."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def free(self, now: dt.datetime) -> ColumnElement[bool]:
        """No lease, or one that expired (its worker died: the job is taken up again)."""
        expires = self.table.c.lease_expires_at
        return expires.is_(None) | (expires < now)

    def claim(
        self,
        conn: Connection,
        *,
        eligible: ColumnElement[bool],
        order_by: Sequence[ColumnElement[Any]],
        worker: str,
        now: dt.datetime,
        lease_seconds: float,
        values: dict[str, Any] | None = None,
    ) -> Row[Any] | None:
        """Lease the first row in `order_by` that is `eligible` and free, to `worker` for
        `lease_seconds`, counting an attempt and setting `values` too; the row as it is
        then, or None when none is. The row is picked, then taken only if still eligible
        and free (on SQLite another process may have taken it in between)."""
        c = self.table.c
        claimable = eligible & self.free(now)
        pick = select(c.id).where(claimable).order_by(*order_by).limit(1)
        if backend_of(conn).supports_skip_locked:
            pick = pick.with_for_update(skip_locked=True)
        row_id = conn.execute(pick).scalar()
        if row_id is None:
            return None
        return conn.execute(
            update(self.table)
            .where(c.id == row_id, claimable)
            .values(
                lease_owner=worker,
                lease_expires_at=now + dt.timedelta(seconds=lease_seconds),
                attempts=c.attempts + 1,
                **(values or {}),
            )
            .returning(self.table)
        ).first()

    def extend(
        self, conn: Connection, row_id: int, worker: str, now: dt.datetime, lease_seconds: float
    ) -> bool:
        """Renew `worker`'s lease for `lease_seconds` from `now`; False when the row is
        another worker's (or no one's) now. On PostgreSQL the row stays locked until the
        transaction ends, so no one takes it meanwhile."""
        c = self.table.c
        result = conn.execute(
            update(self.table)
            .where(c.id == row_id, c.lease_owner == worker)
            .values(lease_expires_at=now + dt.timedelta(seconds=lease_seconds))
        )
        return result.rowcount == 1

    def holds(
        self,
        conn: Connection,
        row_id: int,
        worker: str,
        now: dt.datetime,
        *,
        also: ColumnElement[bool] | None = None,
        lock: bool = False,
    ) -> bool:
        """Whether `worker` holds an unexpired lease on the row (and the row is `also`);
        with `lock`, on PostgreSQL, the row stays locked until the transaction ends."""
        c = self.table.c
        held = (c.id == row_id) & (c.lease_owner == worker) & (c.lease_expires_at >= now)
        stmt = select(c.id).where(held if also is None else held & also)
        if lock and backend_of(conn).is_postgresql:
            stmt = stmt.with_for_update()
        return conn.execute(stmt).first() is not None
