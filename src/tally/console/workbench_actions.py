"""What the workbench's views share about acting: who may (analysts and admins), the
reconciliation a URL names, the view's URL after an action, notes as the API takes them,
who did what (GET .../actions), and a refusal as the API's status and message."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Depends, Request

from tally.console.auth import needs, runtime_of
from tally.console.workbench_groups import MATCHES_PER_PAGE, MatchGroup
from tally.core.errors import (
    ConflictError,
    InvalidBodyError,
    NotFoundError,
    ReconciliationNotFoundError,
    RowNotFoundError,
    TallyError,
)
from tally.core.reconciliation import SideName
from tally.core.reconciliation_actions import NOTE_MAX_CHARS, ActionKind, ActionRecord
from tally.core.users import Role, User
from tally.services.reconciliation.service import Reconciliation

AnalystUser = Annotated[User, Depends(needs(Role.ANALYST))]  # analysts and admins act


def view_url(path: str, **query: object) -> str:
    """A view's URL with its state (empty values and page 1 left out)."""
    kept = {
        k: ",".join(map(str, v)) if isinstance(v, list | tuple) else str(v)
        for k, v in query.items()
        if v not in (None, "", [], ()) and not (k.endswith("page") and v == 1)
    }
    return path + (f"?{urlencode(kept)}" if kept else "")


def form_page(given: object) -> int:
    """A form's hidden page number (1 when it is not one: the action is still done)."""
    text = str(given or "1")
    return int(text) if text.isascii() and text.isdigit() and int(text) >= 1 else 1


def find_reconciliation(
    request: Request, user: User, reconciliation_id: int
) -> Reconciliation | None:
    """The user's workspace's reconciliation, or None (another workspace's is missing)."""
    try:
        return runtime_of(request).reconciliations.get(
            workspace_id=user.workspace_id, derived_id=reconciliation_id
        )
    except ReconciliationNotFoundError:
        return None


def can_act(user: User) -> bool:
    """Analysts and admins act; a viewer sees the same page without its buttons."""
    return user.role.allows(Role.ANALYST)


def ids_of(given: str) -> list[int]:
    """A URL's list of ids (`3,7`), anything else in it dropped: it only words a message."""
    return [int(p) for p in given.split(",") if p.isascii() and p.isdigit()][:MATCHES_PER_PAGE]


def note_of(given: str) -> str | None:
    """A form's note: none when blank; BadNoteError past the API's limit."""
    note = given.strip()
    if len(note) > NOTE_MAX_CHARS:
        raise NoteTooLongError(f"the note is longer than {NOTE_MAX_CHARS:,} characters")
    return note or None


class NoteTooLongError(Exception):
    """A note over the API's NOTE_MAX_CHARS: refused with 422, as the API does."""


def sentence(message: str) -> str:
    """A service's message as a sentence on a page."""
    message = message.rstrip(".")
    return message[:1].upper() + message[1:] + "."


def manual_actions(taken: Iterable[ActionRecord]) -> dict[int, ActionRecord]:
    """The action behind each manual match in force, by match id (a match by hand or a
    confirmed suggestion)."""
    return {
        a.match_id: a for a in taken if a.makes_manual_match and a.undone_at is None and a.match_id
    }


def undone_manual(taken: Iterable[ActionRecord]) -> dict[int, ActionRecord]:
    """The last undone manual match of each match id (the output shows it until the
    run the undo queued)."""
    return {a.match_id: a for a in taken if a.makes_manual_match and a.undone_at and a.match_id}


def rejections(
    taken: Iterable[ActionRecord],
) -> dict[tuple[tuple[int, ...], tuple[int, ...]], ActionRecord]:
    """The rejections in force, by their rows (left, right)."""
    return {
        (a.left_rows, a.right_rows): a
        for a in taken
        if a.kind is ActionKind.REJECT and a.undone_at is None
    }


def rejection_of(
    group: MatchGroup, rejected: dict[tuple[tuple[int, ...], tuple[int, ...]], ActionRecord]
) -> ActionRecord | None:
    """The rejection in force of exactly this match's rows, if any."""
    rows = (tuple(sorted(group.rows(SideName.LEFT))), tuple(sorted(group.rows(SideName.RIGHT))))
    return rejected.get(rows)


def actor_of(action: ActionRecord, *, undo: bool = False) -> str:
    """Who took the action (an older action kept none)."""
    return (action.undo_actor if undo else action.actor) or "someone (not recorded)"


ACTION_ERRORS = (ConflictError, NotFoundError, RowNotFoundError, InvalidBodyError, NoteTooLongError)


def status_of(error: Exception) -> int:
    """The API's status for an action's refusal (api/errors.py's V2 table)."""
    if isinstance(error, ConflictError):
        return 409
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, RowNotFoundError):
        return 400
    return 422  # InvalidBodyError and a note too long, as the API's body validation


def message_of(error: Exception) -> str:
    return sentence(error.message if isinstance(error, TallyError) else str(error))
