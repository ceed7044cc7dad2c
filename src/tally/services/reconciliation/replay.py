"""The actions an analyst took while a run was building, shown again on what the run
publishes. An action changes the published output at once (patches.py); a run that read
the manual work before it then publishes an output built without it, and its `last_run`
would count the rows as they were. So the run's last transaction replays each such
action's change: the matches and resolutions taken since the run read the manual work,
and the resolutions undone since, as their own transactions made them. The run the
action queued then builds them in for good."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from sqlalchemy import Connection

from tally.core.reconciliation import SideName
from tally.core.reconciliation_actions import ActionKind, ActionRecord
from tally.services.reconciliation import patches
from tally.storage import reconciliation_actions as actions
from tally.storage import resources
from tally.storage.derived import records as derived_records

Replay = Callable[[Connection, dt.datetime], None]


def in_force(conn: Connection, derived_id: int) -> frozenset[int]:
    """The ids of the actions in force, read with the manual work a run builds on."""
    return frozenset(a.id for a in actions.list_actions(conn, derived_id, in_force=True))


def replayer(derived_id: int, read: frozenset[int]) -> Replay:
    """What the run's last transaction calls, once its output and last_run are written."""

    def replay(conn: Connection, now: dt.datetime) -> None:
        for action in actions.list_actions(conn, derived_id):
            move = _move(action, read)
            if move is None:
                continue
            record = derived_records.find_derived(conn, derived_id)  # last_run as moved
            if record is None:
                return
            output = resources.lock_resource(conn, record.resource_id)
            matches = 1 if action.kind is ActionKind.MATCH else 0
            patches.apply(conn, record, output, move, now, matches=matches, replayed=True)

    return replay


def _move(action: ActionRecord, read: frozenset[int]) -> list[patches.Move] | None:
    """The change the action made at once that the run did not build in; None for none
    (an action the run read, or a kind that changes the output only through runs)."""
    if action.undone_at is None and action.id not in read:
        if action.kind is ActionKind.MATCH:
            rows = {SideName.LEFT: action.left_rows, SideName.RIGHT: action.right_rows}
            return patches.match_moves(rows, action.note)
        if action.kind is ActionKind.RESOLVE and action.side is not None:
            return [
                patches.resolve_move(action.side, action.rows, action.reason or "", action.note)
            ]
    elif action.undone_at is not None and action.id in read and action.side is not None:
        return [patches.reopen_move(action.side, action.rows, action.undo_note)]
    return None
