"""Queries for derived resources (reconciliations, transformations): their definitions,
their inputs, and the wish for a run (`run_due_at`).

The output is an ordinary resource (resources.py); this table holds what computes it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, case, delete, insert, select, update

from tally.core.clock import as_utc
from tally.storage.derived import runs as derived_run_history
from tally.storage.engine import backend_of
from tally.storage.leases import Leases
from tally.storage.schema import MAX_ID, derived_inputs, derived_resources, is_storable_id

_LEASES = Leases(derived_resources)


@dataclass(frozen=True)
class DerivedRecord:
    id: int
    workspace_id: int
    resource_id: int  # the output
    kind: str
    name: str
    definition: dict[str, Any]
    state: str
    error: str | None
    run_due_at: dt.datetime | None
    attempts: int
    last_run: dict[str, Any] | None
    output_digest: str | None
    run_basis: dict[str, Any] | None = None
    # the run under way: claimed when, the phase it is in and since when; its lease
    run_started_at: dt.datetime | None = None
    run_phase: str | None = None
    run_phase_since: dt.datetime | None = None
    lease_expires_at: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: Any) -> DerivedRecord:
        return cls(
            id=row.id,
            workspace_id=row.workspace_id,
            resource_id=row.resource_id,
            kind=row.kind,
            name=row.name,
            definition=row.definition,
            state=row.state,
            error=row.error,
            run_due_at=_moment(row.run_due_at),
            attempts=int(row.attempts),
            last_run=row.last_run,
            output_digest=row.output_digest,
            run_basis=row.run_basis,
            run_started_at=_moment(row.run_started_at),
            run_phase=row.run_phase,
            run_phase_since=_moment(row.run_phase_since),
            lease_expires_at=_moment(row.lease_expires_at),
        )


def _moment(value: dt.datetime | None) -> dt.datetime | None:
    return as_utc(value) if value else None


def insert_derived(
    conn: Connection,
    *,
    workspace_id: int,
    resource_id: int,
    kind: str,
    name: str,
    definition: dict[str, Any],
    inputs: Sequence[int],
    now: dt.datetime,
) -> int:
    """A new derived resource whose first run is due at once."""
    derived_id = conn.execute(
        insert(derived_resources)
        .values(
            workspace_id=workspace_id,
            resource_id=resource_id,
            kind=kind,
            name=name,
            definition=definition,
            state="queued",
            run_due_at=now,
            attempts=0,
            created_at=now,
            updated_at=now,
        )
        .returning(derived_resources.c.id)
    ).scalar_one()
    set_inputs(conn, derived_id, inputs)
    return int(derived_id)


def set_inputs(conn: Connection, derived_id: int, inputs: Sequence[int]) -> None:
    conn.execute(delete(derived_inputs).where(derived_inputs.c.derived_id == derived_id))
    conn.execute(
        insert(derived_inputs),
        [{"derived_id": derived_id, "resource_id": r} for r in sorted(set(inputs))],
    )


def find_derived(
    conn: Connection, derived_id: int, kind: str | None = None
) -> DerivedRecord | None:
    """The derived resource (of this kind, if one is given); None if there is none."""
    if not is_storable_id(derived_id):
        return None
    stmt = select(derived_resources).where(derived_resources.c.id == derived_id)
    if kind is not None:
        stmt = stmt.where(derived_resources.c.kind == kind)
    row = conn.execute(stmt).first()
    return DerivedRecord.from_row(row) if row else None


def lock_derived(conn: Connection, derived_id: int, kind: str) -> DerivedRecord | None:
    """`find_derived`, holding the row's lock until commit on PostgreSQL (SQLite's one
    writer already serialises): two manual actions on the same rows never both pass
    their checks."""
    if not is_storable_id(derived_id):
        return None
    stmt = select(derived_resources).where(
        derived_resources.c.id == derived_id, derived_resources.c.kind == kind
    )
    if backend_of(conn).is_postgresql:
        stmt = stmt.with_for_update()
    row = conn.execute(stmt).first()
    return DerivedRecord.from_row(row) if row else None


def find_derived_by_output(conn: Connection, resource_id: int) -> DerivedRecord | None:
    row = conn.execute(
        select(derived_resources).where(derived_resources.c.resource_id == resource_id)
    ).first()
    return DerivedRecord.from_row(row) if row else None


def list_derived(
    conn: Connection, workspace_id: int, kind: str, *, after_id: int = 0, limit: int | None = None
) -> list[DerivedRecord]:
    """The workspace's derived resources of this kind with ids above `after_id`, oldest
    first (at most `limit`)."""
    rows = conn.execute(
        select(derived_resources)
        .where(derived_resources.c.workspace_id == workspace_id, derived_resources.c.kind == kind)
        .where(derived_resources.c.id > min(after_id, MAX_ID))
        .order_by(derived_resources.c.id)
        .limit(limit)
    )
    return [DerivedRecord.from_row(r) for r in rows]


def list_run(conn: Connection) -> list[DerivedRecord]:
    """Every derived resource that has run, of every workspace (`last_run` is read)."""
    rows = conn.execute(
        select(derived_resources)
        .where(derived_resources.c.last_run.is_not(None))
        .order_by(derived_resources.c.id)
    )
    return [DerivedRecord.from_row(r) for r in rows]


def request_run(conn: Connection, derived_id: int, due_at: dt.datetime) -> None:
    """Want a run no later than `due_at` (an earlier wish stands: a burst of deliveries
    asks for one run, not one each)."""
    conn.execute(
        update(derived_resources)
        .where(derived_resources.c.id == derived_id)
        .values(
            run_due_at=case(
                (
                    (derived_resources.c.run_due_at.is_(None))
                    | (derived_resources.c.run_due_at > due_at),
                    due_at,
                ),
                else_=derived_resources.c.run_due_at,
            ),
            # a wish after a run that failed for good starts a new series of attempts
            state=case((derived_resources.c.state == "running", "running"), else_="queued"),
            attempts=case(
                (derived_resources.c.state == "failed", 0), else_=derived_resources.c.attempts
            ),
            updated_at=due_at,
        )
    )


def replace_definition(
    conn: Connection,
    derived_id: int,
    *,
    name: str,
    definition: dict[str, Any],
    inputs: Sequence[int],
    now: dt.datetime,
) -> None:
    conn.execute(
        update(derived_resources)
        .where(derived_resources.c.id == derived_id)
        .values(name=name, definition=definition, updated_at=now)
    )
    set_inputs(conn, derived_id, inputs)


def delete_derived(conn: Connection, derived_id: int) -> None:
    """The derived resource, its inputs and its runs (its output is the caller's to
    delete)."""
    derived_run_history.delete_runs(conn, derived_id)
    conn.execute(delete(derived_inputs).where(derived_inputs.c.derived_id == derived_id))
    conn.execute(delete(derived_resources).where(derived_resources.c.id == derived_id))


def inputs_of_output(conn: Connection, resource_id: int) -> list[int]:
    """The resources the derived resource whose output this is reads (none for a source)."""
    rows = conn.execute(
        select(derived_inputs.c.resource_id)
        .join(derived_resources, derived_resources.c.id == derived_inputs.c.derived_id)
        .where(derived_resources.c.resource_id == resource_id)
        .order_by(derived_inputs.c.resource_id)
    )
    return [int(r) for r in rows.scalars()]


def readers_of(conn: Connection, resource_id: int) -> list[int]:
    """The derived resources that read this resource."""
    rows = conn.execute(
        select(derived_inputs.c.derived_id)
        .where(derived_inputs.c.resource_id == resource_id)
        .order_by(derived_inputs.c.derived_id)
    )
    return [int(r) for r in rows.scalars()]


# --- runs: claimed with a lease, as files are (decision 0003) ------------------------------


def claim_due(
    conn: Connection,
    *,
    worker: str,
    now: dt.datetime,
    lease_seconds: float,
    only: int | None = None,
    phase: str,
) -> DerivedRecord | None:
    """Lease the derived resource whose run is due soonest (or `only` that one), if any:
    due (a wish whose time has come), or running under a lease that expired (its worker
    died: the run is taken up again).

    The claim clears the wish (`run_due_at`), so a delivery during the run queues the
    next one; it counts an attempt (a run whose worker dies counts too: a run that kills
    its worker every time ends `failed`, not in a loop). The run starts `now` in `phase`
    (a run taken up again starts over: the phase its dead worker left is gone).
    PostgreSQL skips rows other workers hold (FOR UPDATE SKIP LOCKED); SQLite's one
    writer serialises claims (storage/leases.py)."""
    c = derived_resources.c
    wanted = (c.run_due_at <= now) | (c.state == "running")
    row = _LEASES.claim(
        conn,
        eligible=wanted if only is None else wanted & (c.id == only),
        order_by=(c.run_due_at, c.id),
        worker=worker,
        now=now,
        lease_seconds=lease_seconds,
        values={
            "state": "running",
            "run_due_at": None,
            "updated_at": now,
            "run_started_at": now,
            "run_phase": phase,
            "run_phase_since": now,
        },
    )
    return DerivedRecord.from_row(row) if row else None


extend_lease = _LEASES.extend


def record_phase(
    conn: Connection, derived_id: int, worker: str, *, phase: str, now: dt.datetime
) -> bool:
    """The run `worker` holds entered `phase` at `now`; False (nothing written) when
    the run is another worker's now. One row's small UPDATE, in a transaction of its own."""
    c = derived_resources.c
    result = conn.execute(
        update(derived_resources)
        .where(c.id == derived_id, c.lease_owner == worker)
        .values(run_phase=phase, run_phase_since=now)
    )
    return result.rowcount == 1


# No run under way: no phase.
_NO_RUN: dict[str, Any] = dict(run_started_at=None, run_phase=None, run_phase_since=None)


def _after_run(now: dt.datetime) -> dict[str, Any]:
    """The lease given back, the phase cleared; queued again if a run was wished for
    meanwhile."""
    return dict(
        state=case((derived_resources.c.run_due_at.is_(None), "idle"), else_="queued"),
        lease_owner=None,
        lease_expires_at=None,
        updated_at=now,
        **_NO_RUN,
    )


def record_success(
    conn: Connection,
    derived_id: int,
    *,
    now: dt.datetime,
    last_run: dict[str, Any],
    output_digest: str,
    run_basis: dict[str, Any] | None,
) -> None:
    conn.execute(
        update(derived_resources)
        .where(derived_resources.c.id == derived_id)
        .values(
            **_after_run(now),
            attempts=0,
            error=None,
            last_run=last_run,
            output_digest=output_digest,
            run_basis=run_basis,
        )
    )


def record_output(conn: Connection, derived_id: int, output_digest: str) -> None:
    """The digest of the output just published (its run may still be indexing it)."""
    conn.execute(
        update(derived_resources)
        .where(derived_resources.c.id == derived_id)
        .values(output_digest=output_digest)
    )


def record_failure(
    conn: Connection,
    derived_id: int,
    worker: str,
    *,
    now: dt.datetime,
    error: str,
    retry_at: dt.datetime | None,
) -> bool:
    """A run that raised, if `worker` still held it: due again at `retry_at` (or at an
    earlier wish), or `failed` with its error when `retry_at` is None (the limit)."""
    values: dict[str, Any] = dict(lease_owner=None, lease_expires_at=None, error=error, **_NO_RUN)
    if retry_at is None:
        values.update(state="failed", run_due_at=None)
    else:
        values.update(
            state="queued",
            run_due_at=case(
                (
                    derived_resources.c.run_due_at.is_not(None)
                    & (derived_resources.c.run_due_at < retry_at),
                    derived_resources.c.run_due_at,
                ),
                else_=retry_at,
            ),
        )
    result = conn.execute(
        update(derived_resources)
        .where(derived_resources.c.id == derived_id, derived_resources.c.lease_owner == worker)
        .values(**values, updated_at=now)
    )
    return result.rowcount == 1


def record_patched(
    conn: Connection, derived_id: int, last_run: dict[str, Any], run_basis: dict[str, Any] | None
) -> None:
    """The published output was changed in place by an analyst's action (a resolution):
    `last_run`'s figures as they now are, the run's basis with what the action moved
    (its unmatched rows per date), and no digest (no run built this output, so none may
    take it for the one it would build)."""
    conn.execute(
        update(derived_resources)
        .where(derived_resources.c.id == derived_id)
        .values(last_run=last_run, run_basis=run_basis, output_digest=None)
    )
