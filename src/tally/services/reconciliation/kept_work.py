"""Manual work kept across a removal of a source's rows (a snapshot replaced, a file
taken back: issue 32), inside the removal's own transaction.

Actions name rows by their positions in load order, which a removal shifts. Before the
removal, the rows each action in force names in the source are read (row id and
content); after it, each is found again: by its row id when the row survived (a file
taken back leaves the others' rows as they were), else by its content among the rows
not yet claimed by an earlier action (a snapshot brings the same rows back under new
ids). An action whose rows are all found keeps going: as it is when its positions did
not move, else carried to a new action with the new positions (`carried_from`), the old
one retired saying where it went. An action with a row not found is retired with the
reason. Nothing is deleted: the history shows both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from sqlalchemy import Connection

from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.core.reconciliation_actions import ActionRecord
from tally.services.reconciliation import manual
from tally.services.reconciliation.service import KIND
from tally.storage import reconciliation_actions as actions
from tally.storage import resources
from tally.storage.derived import records as derived_records
from tally.storage.resource_tables import source_rows
from tally.storage.resources import Resource


@dataclass
class KeptCounts:
    """What became of the manual work naming the removed source's rows."""

    kept: int = 0  # in force at the same positions
    carried: int = 0  # in force at new positions (a new action)
    retired: int = 0  # a row is gone: no longer in force


@dataclass
class _Named:
    """The rows a reconciliation's actions in force name in the source, as they were."""

    record_id: int
    definition: ReconciliationDefinition
    sides: tuple[SideName, ...]  # the sides reading the source
    actions: list[ActionRecord]
    rows: dict[int, source_rows.NumberedRow] = field(default_factory=dict)  # by position


@contextmanager
def kept_across_removal(
    conn: Connection, source: Resource, cause: str, now: dt.datetime
) -> Iterator[KeptCounts]:
    """Around the removal (and a snapshot's new rows): the manual work on the source
    found again afterwards (`cause` says what removed the rows, for the reasons)."""
    named = _named_rows(conn, source)
    counts = KeptCounts()
    yield counts
    if named:
        after = resources.get_resource(conn, source.id)
        for each in named:
            _find_again(conn, source, after, each, cause, now, counts)


def _named_rows(conn: Connection, source: Resource) -> list[_Named]:
    found = []
    for derived_id in derived_records.readers_of(conn, source.id):
        record = derived_records.find_derived(conn, derived_id, KIND)
        if record is None:
            continue
        definition = ReconciliationDefinition.from_json(record.definition)
        sides = tuple(s for s in SideName if definition.side(s).resource_id == source.id)
        in_force = actions.list_actions(conn, record.id, in_force=True)
        positions = {p for a in in_force for s in sides for p in _rows_of(a, s)}
        if not positions:
            continue
        named = _Named(record.id, definition, sides, in_force)
        named.rows = source_rows.rows_at(conn, source.table_name, source.columns, sorted(positions))
        found.append(named)
    return found


def _rows_of(action: ActionRecord, side: SideName) -> tuple[int, ...]:
    return action.left_rows if side is SideName.LEFT else action.right_rows


def _find_again(
    conn: Connection,
    before: Resource,
    after: Resource,
    named: _Named,
    cause: str,
    now: dt.datetime,
    counts: KeptCounts,
) -> None:
    table = after.table_name
    survivors = source_rows.positions_of(conn, table, [r for r, _ in named.rows.values()])
    claimed = set(survivors)  # a surviving row stays its own action's
    for action in named.actions:
        moved: dict[SideName, list[int]] = {
            SideName.LEFT: list(action.left_rows),
            SideName.RIGHT: list(action.right_rows),
        }
        lost = []
        for side in named.sides:
            label = named.definition.side(side).name
            for index, position in enumerate(moved[side]):
                found = _position_now(conn, before, after, named, position, survivors, claimed)
                if found is None:
                    lost.append(f"{label} row {position}")
                else:
                    moved[side][index] = found
        if lost:
            reason = f"{', '.join(lost)} no longer in {before.name}: {cause}"
            actions.retire_action(conn, action.id, now, reason)
            counts.retired += 1
            continue
        if all(sorted(moved[s]) == list(_rows_of(action, s)) for s in SideName):
            counts.kept += 1
            continue
        rows = {s: sorted(moved[s]) for s in SideName}
        new_id = actions.insert_action(
            conn,
            derived_id=action.derived_id,
            kind=action.kind,
            left_rows=rows[SideName.LEFT],
            right_rows=rows[SideName.RIGHT],
            fingerprint=manual.fingerprint(conn, named.definition, rows),
            note=action.note,
            now=now,
            carried_from=action.id,
            actor=action.actor,  # still the analyst's work, at the rows' new places
            reason=action.reason,
        )
        where = "; ".join(
            f"{named.definition.side(s).name} rows {', '.join(map(str, rows[s]))}"
            for s in named.sides
        )
        actions.retire_action(
            conn, action.id, now, f"carried to action {new_id}: {cause}; now {where}"
        )
        counts.carried += 1


def _position_now(
    conn: Connection,
    before: Resource,
    after: Resource,
    named: _Named,
    position: int,
    survivors: dict[int, int],
    claimed: set[int],
) -> int | None:
    """Where the row that was at `position` is now: its own row when it survived, else
    the first unclaimed row holding its content (claimed for it); None when none."""
    if position not in named.rows:
        return None
    row_id, values = named.rows[position]
    if row_id in survivors:
        return survivors[row_id]
    holding = source_rows.row_ids_holding(
        conn, after.table_name, after.columns, before.columns, values
    )
    for candidate in holding:
        if candidate not in claimed:
            claimed.add(candidate)
            return source_rows.positions_of(conn, after.table_name, [candidate])[candidate]
    return None
