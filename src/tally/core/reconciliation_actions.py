"""An analyst's action on a reconciliation, as stored and as the API shows it.

A frozen dataclass read from storage (`from_row`) and handed up to the API, so entry
points never import storage to name it (as core/files.py does for files)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tally.core.clock import as_utc
from tally.core.reconciliation import SideName


class ActionKind(StrEnum):
    MATCH = "match"  # rows matched by hand
    CONFIRM = "confirm"  # a suggested match made manual
    REJECT = "reject"  # an automatic or suggested match undone: never paired again
    RESOLVE = "resolve"  # rows of one side closed with a reason code, no counterpart
    # Recorded for the history only (who changed what, when), no rows: never manual work
    DEFINE = "define"  # the definition replaced (PUT, the console's Save)
    RUN = "run"  # a run asked for (POST .../runs, the console's Run now)


NOTE_MAX_CHARS = 10_000  # an action's note, in the API's bodies and the console's forms
MANUAL_KINDS = (ActionKind.MATCH, ActionKind.CONFIRM)  # the actions that make a manual match
# The actions a run applies (manual work: in force until undone or retired); the others
# are events a run never reads, which nothing undoes or retires.
WORK_KINDS = (ActionKind.MATCH, ActionKind.CONFIRM, ActionKind.REJECT, ActionKind.RESOLVE)
MATCH_KINDS = (ActionKind.MATCH, ActionKind.CONFIRM, ActionKind.REJECT)  # those with a match id
UNDOABLE_KINDS = (*MANUAL_KINDS, ActionKind.RESOLVE)


@dataclass(frozen=True)
class ActionRecord:
    """`match_id` is the smallest left row (None for a resolution, which is no match);
    rows are 1-based positions in their input (a resolution's on its one side only);
    `fingerprint` is the sha256 of the rows' content when the action was taken."""

    id: int
    derived_id: int
    kind: ActionKind
    match_id: int | None
    left_rows: tuple[int, ...]
    right_rows: tuple[int, ...]
    fingerprint: str
    note: str | None
    created_at: dt.datetime
    undone_at: dt.datetime | None
    undo_note: str | None  # why a manual match was dissolved (DELETE's note)
    retired_reason: str | None = None  # why it ended with no analyst undoing it
    carried_from: int | None = None  # the action it continues, its rows moved
    actor: str | None = None  # who took it: a user's name, `api key sha256:...`; None: older
    undo_actor: str | None = None  # who dissolved the manual match
    reason: str | None = None  # a resolution's reason code (`bank_fee`)

    @property
    def makes_manual_match(self) -> bool:
        return self.kind in MANUAL_KINDS

    @property
    def can_undo(self) -> bool:
        """Whether an analyst may undo it: a manual match is dissolved, a resolution
        reopened (a rejection is for good; an event is never undone)."""
        return self.kind in UNDOABLE_KINDS

    @property
    def side(self) -> SideName | None:
        """The side a resolution closes rows of (None for the other kinds)."""
        if self.kind is not ActionKind.RESOLVE:
            return None
        return SideName.LEFT if self.left_rows else SideName.RIGHT

    @property
    def rows(self) -> tuple[int, ...]:
        """A resolution's rows (on its one side)."""
        return self.left_rows or self.right_rows

    def resolution_json(self) -> dict[str, Any]:
        """A resolution as the API and the CLI show it."""
        return {
            "id": self.id,
            "side": str(self.side),
            "rows": list(self.rows),
            "reason": self.reason,
            "note": self.note,
            "actor": self.actor,
            "created_at": self.created_at.isoformat(),
            "undone_at": self.undone_at.isoformat() if self.undone_at else None,
            "undo_note": self.undo_note,
            "undo_actor": self.undo_actor,
        }

    @classmethod
    def from_row(cls, row: Any) -> ActionRecord:
        return cls(
            id=row.id,
            derived_id=row.derived_id,
            kind=ActionKind(row.kind),
            match_id=row.match_id,
            left_rows=tuple(row.left_rows),
            right_rows=tuple(row.right_rows),
            fingerprint=row.fingerprint,
            note=row.note,
            created_at=as_utc(row.created_at),
            undone_at=as_utc(row.undone_at) if row.undone_at is not None else None,
            undo_note=row.undo_note,
            retired_reason=row.retired_reason,
            carried_from=row.carried_from,
            actor=row.actor,
            undo_actor=row.undo_actor,
            reason=row.reason,
        )


UNDO, RETIRED = "undo", "retired"  # a history's entries beside the actions' own kinds
HISTORY_KINDS = (*(str(k) for k in ActionKind), UNDO, RETIRED)


@dataclass(frozen=True)
class HistoryFilter:
    """A history's entries of this actor (None: any) and of this kind (None: any, else
    one of HISTORY_KINDS)."""

    actor: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class HistoryEntry:
    """One line of a reconciliation's history, newest first: an action taken (`kind` its
    kind), or the end of one (`undo`: an analyst undid it, with their note; `retired`:
    its rows went, the note says why), each with its own time and actor. `action_id` is
    the action taken or ended; `undone_at` when that action stopped being in force."""

    action_id: int
    kind: str  # an ActionKind's value, UNDO or RETIRED
    at: dt.datetime
    actor: str | None  # a user's name, `api key sha256:...`, `tally admin`; None: unknown
    note: str | None
    match_id: int | None
    left_rows: tuple[int, ...]
    right_rows: tuple[int, ...]
    reason: str | None  # a resolution's reason code
    action_kind: ActionKind  # the kind of the action taken or ended
    undone_at: dt.datetime | None

    @property
    def is_action(self) -> bool:
        """Whether it is the action taken, not its end."""
        return self.kind not in (UNDO, RETIRED)

    @property
    def can_undo(self) -> bool:
        """Whether an analyst may undo it now: a manual match dissolved, a resolution
        reopened (a rejection, a definition change or a run is never undone)."""
        undoable = self.action_kind in UNDOABLE_KINDS
        return self.is_action and self.undone_at is None and undoable

    @classmethod
    def from_row(cls, row: Any) -> HistoryEntry:
        return cls(
            action_id=row.action_id,
            kind=row.kind,
            at=as_utc(row.at),
            actor=row.actor,
            note=row.note,
            match_id=row.match_id,
            left_rows=tuple(row.left_rows),
            right_rows=tuple(row.right_rows),
            reason=row.reason,
            action_kind=ActionKind(row.action_kind),
            undone_at=as_utc(row.undone_at) if row.undone_at is not None else None,
        )
