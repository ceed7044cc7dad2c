"""Queries for a reconciliation's history: every action taken and every end of one
(an undo by an analyst, a retirement with its rows gone) as entries of their own,
newest first, filtered by actor and kind, a page at a time or streamed whole.

Nothing here changes an action: the history is read from the actions table alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.core.reconciliation_actions import RETIRED, UNDO, HistoryEntry, HistoryFilter
from tally.storage.schema import reconciliation_actions as actions

STREAM_CHUNK_ENTRIES = 1000  # entries fetched at a time when streamed whole


def _entries(derived_id: int) -> sa.Subquery:
    """Each action taken (at `created_at`, by `actor`) and each end of one (at
    `undone_at`: an undo by `undo_actor` with its note, or a retirement with its
    reason, by no one)."""
    a = actions.c
    shared = (
        a.id.label("action_id"),
        a.match_id,
        a.left_rows,
        a.right_rows,
        a.reason,
        a.kind.label("action_kind"),
        a.undone_at,
    )
    retired = a.retired_reason.is_not(None)
    taken = sa.select(
        *shared,
        a.kind.label("kind"),
        a.created_at.label("at"),
        a.actor.label("actor"),
        a.note.label("note"),
        sa.literal(0).label("step"),
    ).where(a.derived_id == derived_id)
    ended = sa.select(
        *shared,
        sa.case((retired, sa.literal(RETIRED)), else_=sa.literal(UNDO)).label("kind"),
        a.undone_at.label("at"),
        sa.case((retired, sa.null()), else_=a.undo_actor).label("actor"),
        sa.case((retired, a.retired_reason), else_=a.undo_note).label("note"),
        sa.literal(1).label("step"),
    ).where(a.derived_id == derived_id, a.undone_at.is_not(None))
    return sa.union_all(taken, ended).subquery("entries")


def _selected(derived_id: int, chosen: HistoryFilter) -> sa.Select[tuple[object, ...]]:
    entries = _entries(derived_id)
    stmt = sa.select(entries)
    if chosen.actor is not None:
        stmt = stmt.where(entries.c.actor == chosen.actor)
    if chosen.kind is not None:
        stmt = stmt.where(entries.c.kind == chosen.kind)
    # newest first; an action's end after the action when both have one time
    return stmt.order_by(entries.c.at.desc(), entries.c.action_id.desc(), entries.c.step.desc())


def list_history(
    conn: Connection, derived_id: int, chosen: HistoryFilter, *, offset: int, limit: int
) -> list[HistoryEntry]:
    """One page of the entries, newest first."""
    stmt = _selected(derived_id, chosen).offset(offset).limit(limit)
    return [HistoryEntry.from_row(r) for r in conn.execute(stmt)]


def count_history(conn: Connection, derived_id: int, chosen: HistoryFilter) -> int:
    inner = _selected(derived_id, chosen).order_by(None).subquery()
    return int(conn.execute(sa.select(sa.func.count()).select_from(inner)).scalar_one())


def stream_history(
    conn: Connection, derived_id: int, chosen: HistoryFilter
) -> Iterator[HistoryEntry]:
    """Every entry, newest first, fetched a chunk at a time (in the caller's snapshot)."""
    result = conn.execution_options(yield_per=STREAM_CHUNK_ENTRIES).execute(
        _selected(derived_id, chosen)
    )
    for row in result:
        yield HistoryEntry.from_row(row)


def history_actors(conn: Connection, derived_id: int) -> list[str]:
    """Everyone who took or undid an action of the reconciliation, sorted."""
    a = actions.c
    mine = a.derived_id == derived_id
    names = sa.union(
        sa.select(a.actor.label("name")).where(mine, a.actor.is_not(None)),
        sa.select(a.undo_actor.label("name")).where(mine, a.undo_actor.is_not(None)),
    ).subquery()
    return [str(r[0]) for r in conn.execute(sa.select(names.c.name).order_by(names.c.name))]
