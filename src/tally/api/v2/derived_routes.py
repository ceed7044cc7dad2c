"""The plumbing every /api/v2 route of a derived resource (reconciliations,
transformations) shares: the definition body's limit, the errors of the headers and of a
definition, and the service call off the event loop rendered as the response.

Only what is identical lives here; each router keeps its paths, models and OpenAPI
text, so the document does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from tally.api.errors import json_response
from tally.api.v2.bodies import read_json
from tally.core import errors

MAX_DEFINITION_BYTES = 1024 * 1024
MAX_PAGE = 1000
AUTH = (errors.IngestionForbiddenError,)
DEFINED = (errors.DefinitionRejectedError, errors.InvalidBodyError)


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
