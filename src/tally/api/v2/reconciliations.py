"""/api/v2/reconciliations (issue #11): define, list, replace and delete reconciliations,
queue their runs, and the analysts' manual work on their matches.

The same three headers and the same uniform 403 as the ingestion routes, without the
workspace's ingestion switch. The output is read through the Data API
(`GET /api/v1/resources/{resource_id}/data`) like any resource.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from tally.api.deps import ReconciliationsDep
from tally.api.errors import json_response, v2_responses
from tally.api.v2.auth import KeyActor, KeyedWorkspace
from tally.api.v2.bodies import (
    MAX_DEFINITION_BYTES,
    json_request_body,
    read_json,
    validate_body,
)
from tally.api.v2.derived_routes import (
    AUTH,
    DefinitionRoutes,
    add_definition_routes,
    read_definition,
)
from tally.api.v2.reconciliation_bodies import (
    ActionListResponse,
    CandidatesResponse,
    MatchBody,
    MatchResponse,
    NoteBody,
    ReconciliationCreatedResponse,
    ReconciliationResponse,
    ResolutionBody,
    ResolutionResponse,
    RunQueuedResponse,
    UndoneResponse,
)
from tally.core import errors
from tally.core.columns import INT64_MAX
from tally.core.reconciliation import SideName
from tally.core.reconciliation_actions import ActionRecord
from tally.services.reconciliation.bodies import ReconciliationDefinitionBody
from tally.services.reconciliation.candidates import Candidates

router = APIRouter(prefix="/api/v2", tags=["Reconciliation API"])

BASE = "/reconciliations"
ONE = BASE + "/{reconciliation_id}"
MATCH = ONE + "/matches/{match_id}"
RESOLUTIONS = ONE + "/resolutions"
FOUND = (*AUTH, errors.ReconciliationNotFoundError, RequestValidationError)

ReconciliationId = Annotated[int, Path(description="The reconciliation's id.")]
MatchId = Annotated[int, Path(description="The match's id: its smallest left row.")]
ResolutionId = Annotated[int, Path(description="The resolution's id.")]
Side = Annotated[SideName, Path(description="`left` or `right`.")]
RowNumber = Annotated[
    int, Path(ge=1, le=INT64_MAX, description="The row's position (`<side>._row`).")
]


def _action(action: ActionRecord) -> dict[str, Any]:
    return {
        "id": action.id,
        "kind": str(action.kind),
        "match_id": action.match_id,
        "left_rows": list(action.left_rows),
        "right_rows": list(action.right_rows),
        "fingerprint": action.fingerprint,
        "note": action.note,
        "created_at": action.created_at.isoformat(),
        "undone_at": action.undone_at.isoformat() if action.undone_at else None,
        "undo_note": action.undo_note,
        "retired_reason": action.retired_reason,
        "carried_from": action.carried_from,
        "actor": action.actor,
        "undo_actor": action.undo_actor,
        "reason": action.reason,
    }


def _candidates(found: Candidates) -> dict[str, Any]:
    return {
        "side": str(found.side),
        "row": found.row,
        "status": found.status,
        "match_id": found.match_id,
        "passes": [
            {
                "name": p.name,
                "type": p.type,
                "candidates": [
                    {
                        "row": c.row,
                        "status": c.status,
                        "match_id": c.match_id,
                        "fits": c.fits,
                        "conditions": [
                            {
                                "condition": k.name,
                                "met": k.met,
                                "detail": k.detail,
                                "difference": k.difference,
                                "tolerance": k.tolerance,
                                "days": k.days,
                                "window": list(k.window) if k.window else None,
                            }
                            for k in c.conditions
                        ],
                    }
                    for c in p.candidates
                ],
            }
            for p in found.passes
        ],
    }


async def _note(request: Request) -> str | None:
    """The note of an optional `NoteBody` (no body: none)."""
    data = await read_json(request, max_bytes=MAX_DEFINITION_BYTES, optional=True)
    return None if data is None else validate_body(NoteBody, data).note


add_definition_routes(
    router,
    DefinitionRoutes(
        noun="reconciliation",
        service=ReconciliationsDep,
        body=ReconciliationDefinitionBody,
        created=ReconciliationCreatedResponse,
        shown=ReconciliationResponse,
        not_found=errors.ReconciliationNotFoundError,
        get_summary="A reconciliation: its definition, state and last run",
        replace_description="Manual work names rows by position in the inputs: when a side "
        "reads another resource, every manual action is retired (kept, with `undone_at`). "
        "The change is kept in GET .../actions as an action of kind `define`, with who "
        "made it (`actor`).",
        delete_summary="Delete the reconciliation, its manual work and its output resource",
    ),
)


@router.post(
    ONE + "/runs",
    status_code=202,
    summary="Queue a run now",
    description="Kept in GET .../actions as an action of kind `run`, with who asked for "
    "it (`actor`).",
    response_model=RunQueuedResponse,
    responses=v2_responses(*FOUND),
)
async def queue_run(
    reconciliation_id: ReconciliationId,
    workspace: KeyedWorkspace,
    actor: KeyActor,
    service: ReconciliationsDep,
) -> Response:
    queued = await run_in_threadpool(
        service.queue_run,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        actor=actor,
    )
    return json_response({"id": queued.id, "state": queued.state}, 202)


@router.post(
    ONE + "/matches",
    status_code=201,
    summary="Match rows by hand (status `manual`); no run takes them apart",
    description="Rows are positions (`<side>._row`). Rows in an automatic or suggested "
    "match are released from it. 400 names each row not in its input (side and row); "
    "409 each row already in a manual match, and, where the sides name currencies, each "
    "row when the rows hold two currencies or more (an empty currency joins any).",
    response_model=MatchResponse,
    responses=v2_responses(
        *FOUND, errors.InvalidBodyError, errors.RowNotFoundError, errors.ConflictError
    ),
    openapi_extra=json_request_body(MatchBody),
)
async def match_rows(
    request: Request,
    reconciliation_id: ReconciliationId,
    workspace: KeyedWorkspace,
    actor: KeyActor,
    service: ReconciliationsDep,
) -> Response:
    body = validate_body(MatchBody, await read_definition(request))
    match_id = await run_in_threadpool(
        service.match,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        left_rows=body.left_rows,
        right_rows=body.right_rows,
        note=body.note,
        actor=actor,
    )
    return json_response({"match_id": match_id}, 201)


@router.post(
    MATCH + "/confirm",
    summary="Confirm a suggested match: it becomes manual",
    description='The body is optional: `{"note": "..."}` is kept with the action.',
    response_model=MatchResponse,
    responses=v2_responses(
        *FOUND, errors.InvalidBodyError, errors.MatchNotFoundError, errors.ConflictError
    ),
    openapi_extra=json_request_body(NoteBody, required=False),
)
async def confirm_match(
    request: Request,
    reconciliation_id: ReconciliationId,
    match_id: MatchId,
    workspace: KeyedWorkspace,
    actor: KeyActor,
    service: ReconciliationsDep,
) -> Response:
    note = await _note(request)
    confirmed = await run_in_threadpool(
        service.confirm,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        match_id=match_id,
        note=note,
        actor=actor,
    )
    return json_response({"match_id": confirmed})


@router.delete(
    MATCH,
    summary="Undo a match: a manual one is dissolved, an automatic or suggested one rejected",
    description='The body is optional: `{"note": "..."}` is kept as the dissolved '
    "match's `undo_note`, or as the rejection's `note`.",
    response_model=UndoneResponse,
    responses=v2_responses(*FOUND, errors.InvalidBodyError, errors.MatchNotFoundError),
    openapi_extra=json_request_body(NoteBody, required=False),
)
async def undo_match(
    request: Request,
    reconciliation_id: ReconciliationId,
    match_id: MatchId,
    workspace: KeyedWorkspace,
    actor: KeyActor,
    service: ReconciliationsDep,
) -> Response:
    note = await _note(request)
    outcome = await run_in_threadpool(
        service.undo,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        match_id=match_id,
        note=note,
        actor=actor,
    )
    return json_response({"match_id": match_id, "outcome": outcome})


@router.post(
    RESOLUTIONS,
    status_code=201,
    summary="Close rows of one side that have no counterpart (status `resolved`)",
    description="Rows are positions (`<side>._row`) of one side, each unmatched in the "
    "output: a bank fee, an item booked next period. `reason` is a code of the "
    "definition's `resolution_reasons`. The output shows the rows `resolved` at once "
    "(with `last_run`'s figures moved), and no run takes them. 400 names each row not in "
    "its input; 409 each row already in a manual match or a resolution, or in a match of "
    "the output (undo it first); 422 an unknown `reason`.",
    response_model=ResolutionResponse,
    responses=v2_responses(
        *FOUND, errors.InvalidBodyError, errors.RowNotFoundError, errors.ConflictError
    ),
    openapi_extra=json_request_body(ResolutionBody),
)
async def resolve_rows(
    request: Request,
    reconciliation_id: ReconciliationId,
    workspace: KeyedWorkspace,
    actor: KeyActor,
    service: ReconciliationsDep,
) -> Response:
    body = validate_body(ResolutionBody, await read_definition(request))
    resolution = await run_in_threadpool(
        service.resolve,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        side=SideName(body.side),
        rows=body.rows,
        reason=body.reason,
        note=body.note,
        actor=actor,
    )
    return json_response(resolution.resolution_json(), 201)


@router.delete(
    RESOLUTIONS + "/{resolution_id}",
    summary="Undo a resolution: its rows are unmatched again",
    description='The body is optional: `{"note": "..."}` is kept as its `undo_note`. The '
    "output shows the rows unmatched at once; the run it queues gives their reasons. The "
    "resolution stays in GET .../actions with `undone_at`.",
    response_model=ResolutionResponse,
    responses=v2_responses(*FOUND, errors.InvalidBodyError, errors.ResolutionNotFoundError),
    openapi_extra=json_request_body(NoteBody, required=False),
)
async def undo_resolution(
    request: Request,
    reconciliation_id: ReconciliationId,
    resolution_id: ResolutionId,
    workspace: KeyedWorkspace,
    actor: KeyActor,
    service: ReconciliationsDep,
) -> Response:
    note = await _note(request)
    undone = await run_in_threadpool(
        service.reopen,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        resolution_id=resolution_id,
        note=note,
        actor=actor,
    )
    return json_response(undone.resolution_json())


@router.get(
    ONE + "/rows/{side}/{row}/candidates",
    summary="A row's candidates under each pass, each condition met or failed",
    description="For the row at this position of one side: per pass, at most 10 rows of "
    "the other side that come closest (those sharing its key under a keyed pass, and "
    "those nearest by amount), best first, each with every condition of the pass it "
    "meets or fails and by how much (keys after the normalisers, currency, amount "
    "against the tolerance, date against the window, a rejection, whether it is free). "
    "Exact decimals. As the last run left the output: a row it does not show yet is a "
    "409; a row not in its input a 400 naming `row`. A matched row gets its candidates "
    "too (its `status` says it is matched).",
    response_model=CandidatesResponse,
    responses=v2_responses(*FOUND, errors.RowNotFoundError, errors.ConflictError),
)
async def row_candidates(
    reconciliation_id: ReconciliationId,
    side: Side,
    row: RowNumber,
    workspace: KeyedWorkspace,
    service: ReconciliationsDep,
) -> Response:
    found = await run_in_threadpool(
        service.candidates,
        workspace_id=workspace.id,
        reconciliation_id=reconciliation_id,
        side=side,
        row=row,
    )
    return json_response(_candidates(found))


@router.get(
    ONE + "/actions",
    summary="Every action taken, in order, undone ones included",
    description="The manual work (`match`, `confirm`, `reject`, `resolve`) and the events "
    "kept beside it (`define`: the definition replaced; `run`: a run asked for), each "
    "with who took it (`actor`). An event names no rows and is never undone.",
    response_model=ActionListResponse,
    responses=v2_responses(*FOUND),
)
async def list_actions(
    reconciliation_id: ReconciliationId, workspace: KeyedWorkspace, service: ReconciliationsDep
) -> Response:
    taken = await run_in_threadpool(
        service.actions, workspace_id=workspace.id, reconciliation_id=reconciliation_id
    )
    return json_response({"data": [_action(a) for a in taken]})
