"""What the /api/v2 routes of every kind of derived resource (reconciliations,
transformations) share: the five routes of a definition's lifecycle (create, list, get,
replace, delete: `add_definition_routes`, given the kind's service, models and OpenAPI
texts) and the list of its last runs (`.../{id}/runs`), the definition body's limit,
the errors of the headers and of a definition, and the service call off the event loop
rendered as the response.

Each kind's router keeps its own routes (a reconciliation's manual work, a
transformation's preview) and its models (api/v2/<kind>_bodies.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field, create_model

from tally.api.errors import json_response, v2_responses
from tally.api.v2.auth import KeyActor, KeyedWorkspace
from tally.api.v2.bodies import MAX_DEFINITION_BYTES, json_request_body, read_json
from tally.core import errors
from tally.services.derived.history import RUNS_KEPT

MAX_PAGE = 1000
AUTH = (errors.IngestionForbiddenError,)
DEFINED = (errors.DefinitionRejectedError, errors.InvalidBodyError)


class RunResponse(BaseModel):
    id: int
    started_at: str
    finished_at: str
    outcome: Literal["succeeded", "failed"]
    rows: int | None = Field(description="The output's rows after a run that succeeded.")
    error: str | None = Field(description="Why a failed run failed, in full.")


class RunUnderWayResponse(BaseModel):
    phase: Literal[
        "starting",
        "reading",
        "matching",
        "querying",
        "writing",
        "publishing",
        "indexing",
        "stalled",
    ] = Field(
        description="What the run is doing: `starting` (claimed by a worker), `reading` "
        "its inputs, `matching` (a reconciliation) or `querying` (a transformation), "
        "`writing` the output beside the published one, `publishing` it (readable from "
        "then on), `indexing` it (read by scans until its indexes are built); `stalled`: "
        "its worker stopped (its lease expired at `phase_since`), another worker takes "
        "it up from the start."
    )
    phase_since: str = Field(description="When the run entered the phase (ISO 8601, UTC).")
    started_at: str = Field(description="When a worker took the run (ISO 8601, UTC).")


RUN_DESCRIPTION = (
    "The run under way (state `running`): its phase and since when; null when none is."
)
PHASES_DESCRIPTION = (
    "phases (the seconds each phase took: reading, matching or querying, writing, "
    "publishing, indexing; those the run went through)"
)


class RunListResponse(BaseModel):
    data: list[RunResponse] = Field(
        description=f"The last runs that finished, newest first (at most {RUNS_KEPT})."
    )


class Shown(Protocol):
    """A derived resource as the API shows it."""

    @property
    def id(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


async def read_definition(request: Request) -> Any:
    """The request's JSON body, at most MAX_DEFINITION_BYTES of it."""
    return await read_json(request, max_bytes=MAX_DEFINITION_BYTES)


async def shown(call: Callable[..., Shown], **arguments: Any) -> Response:
    """The derived resource the service call returns, as JSON (200)."""
    found = await run_in_threadpool(call, **arguments)
    return json_response(found.to_json())


async def page(call: Callable[..., Sequence[Shown]], *, limit: int, **arguments: Any) -> Response:
    """A page of derived resources; `next_after` is null once a page comes back short."""
    found = await run_in_threadpool(call, limit=limit, **arguments)
    next_after = found[-1].id if len(found) == limit else None
    return json_response({"data": [r.to_json() for r in found], "next_after": next_after})


async def deleted(call: Callable[..., None], **arguments: Any) -> Response:
    """The service call's deletion done: 204, no body."""
    await run_in_threadpool(call, **arguments)
    return Response(status_code=204)


@dataclass(frozen=True)
class DefinitionRoutes:
    """A kind's five lifecycle routes: at /<noun>s and /<noun>s/{<noun>_id}, named
    `create_<noun>`, `list_<noun>s`, `get_<noun>`, `replace_<noun>`, `delete_<noun>`
    (the operationIds), calling the kind's service (a `DefinitionLifecycle`)."""

    noun: str  # "reconciliation"
    service: Any  # the service's FastAPI dependency, an Annotated[..., Depends(...)]
    body: type[BaseModel]  # the definition, as POST and PUT take it
    created: type[BaseModel]  # POST's answer: the fields of `shown` it names
    shown: type[BaseModel]  # GET's and PUT's answer, and a page's items
    not_found: type[errors.NotFoundError]
    get_summary: str
    delete_summary: str
    replace_description: str | None = None
    delete_description: str | None = None

    @property
    def plural(self) -> str:
        return self.noun + "s"


def add_definition_routes(router: APIRouter, kind: DefinitionRoutes) -> None:
    """Add the kind's create, list, get, replace and delete routes to `router`, after
    any of its routes whose paths the id's path would otherwise take."""
    base = f"/{kind.plural}"
    one = f"{base}/{{{kind.noun}_id}}"
    found = (*AUTH, kind.not_found, RequestValidationError)
    the_id = _parameter(
        f"{kind.noun}_id", Annotated[int, Path(description=f"The {kind.noun}'s id.")]
    )
    request = _parameter("request", Request)
    workspace = _parameter("workspace", KeyedWorkspace)
    actor = _parameter("actor", KeyActor)
    service = _parameter("service", kind.service)
    after = _parameter(
        "after",
        Annotated[int, Query(ge=0, description=f"{kind.plural.capitalize()} with a larger id.")],
        default=0,
    )
    limit = _parameter("limit", Annotated[int, Query(ge=1, le=MAX_PAGE)], default=100)

    async def create(request: Request, workspace: Any, service: Any) -> Response:
        body = await read_definition(request)
        made = await run_in_threadpool(service.create, workspace_id=workspace.id, body=body)
        shown = made.to_json()
        return json_response({k: shown[k] for k in kind.created.model_fields}, 201)

    async def list_page(workspace: Any, service: Any, after: int, limit: int) -> Response:
        return await page(
            service.list_defined, workspace_id=workspace.id, after_id=after, limit=limit
        )

    async def get(workspace: Any, service: Any, **the: int) -> Response:
        return await shown(service.get, workspace_id=workspace.id, derived_id=the[the_id.name])

    async def replace(
        request: Request, workspace: Any, actor: str, service: Any, **the: int
    ) -> Response:
        body = await read_definition(request)
        return await shown(
            service.replace,
            workspace_id=workspace.id,
            derived_id=the[the_id.name],
            body=body,
            actor=actor,
        )

    async def list_runs(workspace: Any, service: Any, **the: int) -> Response:
        found = await run_in_threadpool(
            service.list_runs, workspace_id=workspace.id, derived_id=the[the_id.name]
        )
        return json_response({"data": [run.to_json() for run in found]})

    async def delete(workspace: Any, service: Any, **the: int) -> Response:
        return await deleted(service.delete, workspace_id=workspace.id, derived_id=the[the_id.name])

    _add(
        router,
        "POST",
        base,
        create,
        f"create_{kind.noun}",
        (request, workspace, service),
        status_code=201,
        summary=f"Define a {kind.noun}; its first run is queued at once",
        response_model=kind.created,
        responses=v2_responses(*AUTH, *DEFINED, errors.StorageProvisioningError),
        openapi_extra=json_request_body(kind.body),
    )
    _add(
        router,
        "GET",
        base,
        list_page,
        f"list_{kind.plural}",
        (workspace, service, after, limit),
        summary=f"The workspace's {kind.plural}, oldest first",
        response_model=page_model(kind.shown, f"{kind.noun.capitalize()}ListResponse"),
        responses=v2_responses(*AUTH, RequestValidationError),
    )
    _add(
        router,
        "GET",
        one,
        get,
        f"get_{kind.noun}",
        (the_id, workspace, service),
        summary=kind.get_summary,
        response_model=kind.shown,
        responses=v2_responses(*found),
    )
    _add(
        router,
        "PUT",
        one,
        replace,
        f"replace_{kind.noun}",
        (request, the_id, workspace, actor, service),
        summary="Replace the definition; a run is queued at once",
        description=kind.replace_description,
        response_model=kind.shown,
        responses=v2_responses(*found, *DEFINED),
        openapi_extra=json_request_body(kind.body),
    )
    _add(
        router,
        "GET",
        f"{one}/runs",
        list_runs,
        f"list_{kind.noun}_runs",
        (the_id, workspace, service),
        summary=f"The {kind.noun}'s last runs, newest first",
        description=f"Each run that finished, succeeded or failed, the last {RUNS_KEPT}.",
        response_model=RunListResponse,
        responses=v2_responses(*found),
    )
    _add(
        router,
        "DELETE",
        one,
        delete,
        f"delete_{kind.noun}",
        (the_id, workspace, service),
        status_code=204,
        summary=kind.delete_summary,
        description=kind.delete_description,
        responses=v2_responses(*found, errors.ConflictError),
    )


def page_model(item: type[BaseModel], name: str) -> type[BaseModel]:
    """The model of a page of `item`s: `data`, and `next_after` for the next page."""
    return create_model(
        name,
        data=(list[item], ...),  # type: ignore[valid-type]
        next_after=(
            int | None,
            Field(description="Pass as `after` for the next page; null at the end."),
        ),
    )


def _parameter(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
    return inspect.Parameter(
        name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation, default=default
    )


def _add(
    router: APIRouter,
    method: str,
    path: str,
    endpoint: Callable[..., Any],
    name: str,
    parameters: tuple[inspect.Parameter, ...],
    **route: Any,
) -> None:
    """The route, its endpoint taking `parameters` (FastAPI reads the signature: the id
    is the kind's own name, `reconciliation_id`, in the path and the document)."""
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        list(parameters), return_annotation=Response
    )
    endpoint.__name__ = endpoint.__qualname__ = name
    router.add_api_route(path, endpoint, methods=[method], name=name, **route)
