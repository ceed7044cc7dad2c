"""One-sided resolutions (issue #34): rows of one side that have no counterpart (a bank
fee, an item booked next period) closed by an analyst with a reason code from the
definition's `resolution_reasons` and a note, and reopened; inside the caller's
transaction.

A resolution is an action (kind `resolve`) that every run applies after the manual
matches (passes.apply_manual): its rows are `resolved` and taken by no pass. It also
changes the published output at once, so the row leaves `status=unmatched` without
waiting for the run it queues (patches.py): the row's status and reason, the output's
data version, and last_run's counts and amounts (moved between unmatched and
resolved). Only rows the output shows unmatched can be resolved: a row in an automatic
or suggested match is a 409 (undo the match first), so the patch never has a
counterpart to explain.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from sqlalchemy import Connection

from tally.core.columns import INT64_MAX
from tally.core.errors import (
    ConflictError,
    FieldProblem,
    InvalidBodyError,
    ResolutionNotFoundError,
)
from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.core.reconciliation_actions import ActionKind, ActionRecord
from tally.services.reconciliation import manual, patches
from tally.storage import reconciliation_actions as actions
from tally.storage import resources
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord

ROWS_FIELD = "rows[{index}]"


def resolve(
    conn: Connection,
    record: DerivedRecord,
    side: SideName,
    rows: Sequence[int],
    reason: str,
    note: str | None,
    now: dt.datetime,
    actor: str | None = None,
) -> ActionRecord:
    """Close these rows of one side with the reason code; the resolution (its action).
    InvalidBodyError for a code the definition does not list; RowNotFoundError for a
    row not in its input; ConflictError naming each row in a manual match or a
    resolution already, or in a match of the published output."""
    definition = ReconciliationDefinition.from_json(record.definition)
    if reason not in definition.resolution_reasons:
        known = ", ".join(definition.resolution_reasons)
        raise InvalidBodyError(
            [FieldProblem("reason", f"unknown reason {reason!r}: one of {known}")]
        )
    manual.check_rows(
        conn, record.id, definition, {side: rows}, field=ROWS_FIELD, one_currency=False
    )
    output = resources.lock_resource(conn, record.resource_id)
    shown = patches.statuses(conn, output, definition, side, rows)
    matched = [
        FieldProblem(
            ROWS_FIELD.format(index=index),
            f"{side} row {row} is in match {shown[row][1]} ({shown[row][0]}): only an "
            "unmatched row can be resolved; undo the match first",
        )
        for index, row in enumerate(rows)
        if row in shown and shown[row][0] != patches.UNMATCHED
    ]
    if matched:
        raise ConflictError(matched)
    named = {side: list(rows), _other(side): []}
    action_id = manual.record_action(
        conn, record, ActionKind.RESOLVE, named, note, now, actor, reason=reason
    )
    open_rows = [r for r in rows if r in shown]
    patches.apply(conn, record, output, [patches.resolve_move(side, open_rows, reason, note)], now)
    return _action(conn, record, action_id)


def reopen(
    conn: Connection,
    record: DerivedRecord,
    resolution_id: int,
    note: str | None,
    now: dt.datetime,
    actor: str | None = None,
) -> ActionRecord:
    """Undo the resolution in force `resolution_id` (the undo kept on it, with the note
    and who): its rows are unmatched again at once, their reason given by the run it
    queues. ResolutionNotFoundError when there is none."""
    found = _action(conn, record, resolution_id)
    if found.undone_at is not None or found.side is None:
        raise ResolutionNotFoundError()
    actions.undo_action(conn, found.id, now, note, actor)
    derived_records.request_run(conn, record.id, now)
    output = resources.lock_resource(conn, record.resource_id)
    move = patches.reopen_move(found.side, list(found.rows), note)
    patches.apply(conn, record, output, [move], now)
    return _action(conn, record, resolution_id)


def _action(conn: Connection, record: DerivedRecord, action_id: int) -> ActionRecord:
    """One action of this reconciliation; ResolutionNotFoundError when it has none of
    that id."""
    found = None
    if 1 <= action_id <= INT64_MAX:
        found = actions.find_action(conn, record.id, action_id)
    if found is None:
        raise ResolutionNotFoundError()
    return found


def _other(side: SideName) -> SideName:
    return SideName.RIGHT if side is SideName.LEFT else SideName.LEFT
