"""The Exceptions view's actions, an analyst's or an admin's (checked here, on the
server): "Match" the ticked rows of both sides (ReconciliationService.match, the service
POST /api/v2/reconciliations/{id}/matches calls, the user's name as the actor) and
"Resolve" the ticked rows of one side with a reason code and a note (.resolve, as
POST .../resolutions). Success answers 303 to the view as it was (its filters and pages
kept) saying what was done; a refusal re-renders the view with the API's status (422 a
missing note or an unknown reason, 409 a row taken, 400 a selection the action cannot
take) and the message beside what is at fault, the rows still ticked."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from tally.console.auth import needs, runtime_of
from tally.console.exceptions_view import BadExceptionsViewError, ExceptionsView
from tally.console.pages import not_found_page
from tally.console.sign_in import see_other
from tally.console.workbench_exceptions import Outcome, page
from tally.core.errors import (
    ConflictError,
    FieldProblem,
    InvalidBodyError,
    ReconciliationNotFoundError,
    RowNotFoundError,
)
from tally.core.reconciliation import SideName
from tally.core.users import Role, User

router = APIRouter(include_in_schema=False)
Analyst = Annotated[User, Depends(needs(Role.ANALYST))]
MAX_FORM_FIELDS = 2_000  # rows ticked on two pages and a panel, with room to spare
MAX_NOTE_CHARS = 10_000  # as the API's bodies (api/v2/reconciliation_bodies.py)


class SelectionError(Exception):
    """A selection the action cannot take (no row, both sides for a resolution)."""


@router.post("/console/reconciliations/{reconciliation_id}/exceptions")
async def act(request: Request, user: Analyst, reconciliation_id: int) -> Response:
    async with request.form(max_fields=MAX_FORM_FIELDS, max_files=0) as form:
        view_text = str(form.get("view", ""))
        action = str(form.get("action", ""))
        outcome = Outcome(
            note=str(form.get("note", "")).strip(),
            reason=str(form.get("reason", "")),
        )
        try:
            outcome.ticked = _ticked(form)
        except SelectionError as refused:
            return await _refused(request, user, reconciliation_id, view_text, outcome, refused)
    try:
        view = ExceptionsView.of(parse_qsl(view_text, keep_blank_values=True))
    except BadExceptionsViewError:
        view = ExceptionsView.of([])
    try:
        if len(outcome.note) > MAX_NOTE_CHARS:
            problem = FieldProblem("note", f"the note is longer than {MAX_NOTE_CHARS} characters")
            raise InvalidBodyError([problem])
        if action == "resolve":
            done = await _resolve(request, user, reconciliation_id, outcome)
        else:
            done = await _match(request, user, reconciliation_id, outcome)
    except ReconciliationNotFoundError:
        return await run_in_threadpool(not_found_page, request)
    except (SelectionError, InvalidBodyError, ConflictError, RowNotFoundError) as refused:
        return await _refused(request, user, reconciliation_id, view.query(), outcome, refused)
    query = "&".join(q for q in (view.query(), done) if q)
    return see_other(f"/console/reconciliations/{reconciliation_id}/exceptions?{query}")


def _ticked(form: FormData) -> dict[SideName, list[int]]:
    ticked = {}
    for which in SideName:
        rows = []
        for value in form.getlist(str(which)):
            text = str(value)
            if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 2**63 - 1:
                raise SelectionError(f"{text!r} is no row of the {which} side.")
            rows.append(int(text))
        ticked[which] = sorted(set(rows))
    return ticked


async def _match(request: Request, user: User, reconciliation_id: int, outcome: Outcome) -> str:
    left, right = outcome.ticked[SideName.LEFT], outcome.ticked[SideName.RIGHT]
    if not left or not right:
        raise SelectionError("Tick at least one row of each side to match them.")
    match_id = await run_in_threadpool(
        runtime_of(request).reconciliations.match,
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation_id,
        left_rows=left,
        right_rows=right,
        note=outcome.note or None,
        actor=user.name,
    )
    return f"matched={match_id}:{_listed(left)}:{_listed(right)}"


async def _resolve(request: Request, user: User, reconciliation_id: int, outcome: Outcome) -> str:
    sides = [which for which in SideName if outcome.ticked[which]]
    if len(sides) != 1:
        raise SelectionError(
            "Resolve closes rows of one side: tick rows of one side only."
            if sides
            else "Tick the rows to resolve."
        )
    which = sides[0]
    resolution = await run_in_threadpool(
        runtime_of(request).reconciliations.resolve,
        workspace_id=user.workspace_id,
        reconciliation_id=reconciliation_id,
        side=which,
        rows=outcome.ticked[which],
        reason=outcome.reason,
        note=outcome.note or None,
        actor=user.name,
    )
    return f"resolved={resolution.id}:{which}:{_listed(outcome.ticked[which])}"


def _listed(rows: list[int]) -> str:
    return ",".join(str(r) for r in rows)


STATUS = {InvalidBodyError: 422, ConflictError: 409, RowNotFoundError: 400, SelectionError: 400}


async def _refused(
    request: Request,
    user: User,
    reconciliation_id: int,
    view_text: str,
    outcome: Outcome,
    refused: Exception,
) -> Response:
    """The view again with the refusal's status, each problem where it belongs: a note
    or reason beside its field, a row's (named as the page names it: `bank row 6`)
    beside the buttons."""
    outcome.status_code = STATUS[type(refused)]
    problems: list[FieldProblem] = getattr(refused, "problems", [FieldProblem(None, str(refused))])
    for problem in problems:
        where = problem.field if problem.field in ("note", "reason") else "rows"
        outcome.problems.setdefault(where, []).append(problem.message)
    items = parse_qsl(view_text, keep_blank_values=True)
    return await page(request, user, reconciliation_id, items, outcome)
