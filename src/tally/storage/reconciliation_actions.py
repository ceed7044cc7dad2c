"""Queries for the analysts' actions on a reconciliation (manual matches, confirmations,
rejections, resolutions; and the events kept beside them: a definition replaced, a run
asked for), and what they need of row tables: input rows by position, the
rows of one match in the current output, and the output's rows a resolution closes (or
reopens) at once.

An action is never deleted while its reconciliation lives: undoing a manual match, or
retiring every action when a side's resource changes, sets `undone_at`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.clock import as_utc
from tally.core.columns import Column
from tally.core.reconciliation import ManualMatch, ManualWork, Rejection, Resolution
from tally.core.reconciliation_actions import MATCH_KINDS, WORK_KINDS, ActionKind, ActionRecord
from tally.storage.resource_tables import source_rows
from tally.storage.resource_tables.ddl import ROW_ID, ROW_JSON, row_table
from tally.storage.schema import reconciliation_actions as actions


def insert_action(
    conn: Connection,
    *,
    derived_id: int,
    kind: ActionKind,
    left_rows: Sequence[int],
    right_rows: Sequence[int],
    fingerprint: str,
    note: str | None,
    now: dt.datetime,
    carried_from: int | None = None,
    actor: str | None = None,
    reason: str | None = None,
) -> int:
    """Record an action; its match id is its smallest left row (as in the output), none
    for a resolution (`reason`: its code) or an event with no rows (a definition
    replaced, a run asked for). `carried_from`: the action this one continues, its rows
    found at new positions."""
    action_id = conn.execute(
        sa.insert(actions)
        .values(
            derived_id=derived_id,
            kind=str(kind),
            match_id=min(left_rows) if kind in MATCH_KINDS else None,
            reason=reason,
            left_rows=sorted(left_rows),
            right_rows=sorted(right_rows),
            fingerprint=fingerprint,
            note=note,
            created_at=now,
            carried_from=carried_from,
            actor=actor,
        )
        .returning(actions.c.id)
    ).scalar_one()
    return int(action_id)


def list_actions(
    conn: Connection,
    derived_id: int,
    *,
    in_force: bool = False,
    kinds: Sequence[ActionKind] | None = None,
) -> list[ActionRecord]:
    """The actions in the order they were taken (`in_force`: only the manual work not
    undone, never an event such as a definition replaced; `kinds`: only those, so a
    reader of rejections does not parse every resolution's rows too)."""
    stmt = sa.select(actions).where(actions.c.derived_id == derived_id)
    if in_force:
        stmt = stmt.where(actions.c.undone_at.is_(None), _is_work())
    if kinds is not None:
        stmt = stmt.where(actions.c.kind.in_([str(k) for k in kinds]))
    return [ActionRecord.from_row(r) for r in conn.execute(stmt.order_by(actions.c.id))]


def find_action(conn: Connection, derived_id: int, action_id: int) -> ActionRecord | None:
    """One action of this reconciliation (undone or not), if it has that id."""
    row = conn.execute(
        sa.select(actions).where(actions.c.derived_id == derived_id, actions.c.id == action_id)
    ).first()
    return None if row is None else ActionRecord.from_row(row)


def manual_work(conn: Connection, derived_id: int) -> ManualWork:
    """What a run must respect: the manual matches and the rejections in force."""
    in_force = list_actions(conn, derived_id, in_force=True)
    return ManualWork(
        matches=tuple(
            ManualMatch(min(a.left_rows), a.left_rows, a.right_rows, a.note)
            for a in in_force
            if a.makes_manual_match
        ),
        rejections=tuple(
            Rejection(a.left_rows, a.right_rows) for a in in_force if a.kind is ActionKind.REJECT
        ),
        resolutions=tuple(
            Resolution(a.side, a.rows, a.reason or "", a.note)
            for a in in_force
            if a.side is not None
        ),
    )


def undo_action(
    conn: Connection,
    action_id: int,
    now: dt.datetime,
    note: str | None,
    actor: str | None = None,
) -> None:
    conn.execute(
        sa.update(actions)
        .where(actions.c.id == action_id)
        .values(undone_at=now, undo_note=note, undo_actor=actor)
    )


def retire_actions(conn: Connection, derived_id: int, now: dt.datetime, reason: str) -> int:
    """Every action in force set undone, saying why (its rows named positions of inputs
    no longer read); how many."""
    result = conn.execute(
        sa.update(actions)
        .where(actions.c.derived_id == derived_id, actions.c.undone_at.is_(None), _is_work())
        .values(undone_at=now, retired_reason=reason)
    )
    return int(result.rowcount)


def _is_work() -> sa.ColumnElement[bool]:
    """Manual work, which can be in force (an event is only recorded)."""
    return actions.c.kind.in_([str(k) for k in WORK_KINDS])


def retire_action(conn: Connection, action_id: int, now: dt.datetime, reason: str) -> None:
    """One action no longer in force, though no analyst undid it: why."""
    conn.execute(
        sa.update(actions)
        .where(actions.c.id == action_id)
        .values(undone_at=now, retired_reason=reason)
    )


@dataclass(frozen=True)
class Retirements:
    """Actions ended without an analyst since a time: carried to new positions, or
    retired with their rows gone; `through`: the latest such end (None: none)."""

    carried: int
    retired: int
    through: dt.datetime | None


def retirements(conn: Connection, derived_id: int, *, after: dt.datetime | None) -> Retirements:
    """The actions that stopped being in force with a `retired_reason` after `after`."""
    stmt = sa.select(actions.c.id, actions.c.undone_at).where(
        actions.c.derived_id == derived_id, actions.c.retired_reason.is_not(None)
    )
    if after is not None:
        stmt = stmt.where(actions.c.undone_at > after)
    ended = {int(r.id): as_utc(r.undone_at) for r in conn.execute(stmt)}
    carried = set()
    if ended:
        carried = {
            int(r[0])
            for r in conn.execute(
                sa.select(actions.c.carried_from).where(actions.c.carried_from.in_(list(ended)))
            )
        }
    return Retirements(
        carried=len(carried),
        retired=len(ended) - len(carried),
        through=max(ended.values()) if ended else None,
    )


def delete_actions(conn: Connection, derived_id: int) -> None:
    conn.execute(sa.delete(actions).where(actions.c.derived_id == derived_id))


def rows_at(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    positions: Sequence[int],
    *,
    row_count: int | None = None,
) -> dict[int, tuple[Any, ...]]:
    """The rows at these 1-based positions, each as its values in column order
    (`source_rows.rows_at` without the row ids)."""
    found = source_rows.rows_at(conn, table, columns, positions, row_count=row_count)
    return {p: values for p, (_, values) in found.items()}


@dataclass(frozen=True)
class OutputPair:
    """One row of a match in an output: its status and the two positions it pairs."""

    status: str
    left_row: int | None
    right_row: int | None


def match_in_output(
    conn: Connection,
    table: str,
    *,
    match_id: Column,
    status: Column,
    left_row: Column,
    right_row: Column,
    value: int,
) -> list[OutputPair]:
    """The output's rows whose match id is `value` (none: no such match)."""
    source = row_table(table, [match_id, status, left_row, right_row])
    stmt = sa.select(
        source.c[status.physical], source.c[left_row.physical], source.c[right_row.physical]
    ).where(source.c[match_id.physical] == value)
    return [OutputPair(r[0], r[1], r[2]) for r in conn.execute(stmt.order_by(source.c[ROW_ID]))]


def set_rows(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    *,
    position: Column,
    rows: Sequence[int],
    was: str,
    values: Sequence[tuple[Column, Any]],
) -> int:
    """In the caller's transaction: the output's rows showing these positions of one
    side (`position`, its `<side>._row`) with status `was` given these values (the
    match's own columns); how many rows changed. Their stored JSON text, which an
    output published before 2026-11-30 still has, is cleared: pages render them."""
    source = row_table(table, columns)
    status = columns[1]  # output_columns.py's order
    where = sa.and_(source.c[position.physical].in_(list(rows)), source.c[status.physical] == was)
    changed = {c.physical: v for c, v in values} | {ROW_JSON: None}
    return int(conn.execute(sa.update(source).where(where).values(changed)).rowcount)


def statuses_at(
    conn: Connection,
    table: str,
    *,
    position: Column,
    status: Column,
    match_id: Column,
    rows: Sequence[int],
) -> dict[int, tuple[str, int | None]]:
    """The output's status and match id of each of these positions of one side
    (`position`: its `<side>._row`); a position the output does not show is left out."""
    source = row_table(table, [position, status, match_id])
    stmt = sa.select(
        source.c[position.physical], source.c[status.physical], source.c[match_id.physical]
    ).where(source.c[position.physical].in_(list(rows)))
    return {int(r[0]): (str(r[1]), r[2]) for r in conn.execute(stmt)}
