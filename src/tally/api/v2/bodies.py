"""The one way /api/v2 reads a body: within its size, as JSON, checked against its model
(each fault named by its path); and the request models' JSON schemas for OpenAPI.

Bodies are parsed by hand after authentication (see auth.py): FastAPI would otherwise
validate them first, and a bad body with bad credentials must be a 403.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from fastapi import Request
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.json_schema import models_json_schema

from tally.api.errors import validation_problems
from tally.core.errors import FieldProblem, InvalidBodyError

T = TypeVar("T")
COMPONENTS = "#/components/schemas/"
# A definition's body (a source's, a reconciliation's, a transformation's): far more than
# any real one needs, little enough to hold in memory.
MAX_DEFINITION_BYTES = 1024 * 1024


async def read_json(request: Request, *, max_bytes: int, optional: bool = False) -> Any:
    """The body as JSON, refusing more than max_bytes without reading it all (`optional`:
    no body at all is None)."""
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise InvalidBodyError(
                [FieldProblem(None, f"the body is larger than {max_bytes} bytes")]
            )
        chunks.append(chunk)
    if optional and not size:
        return None
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as exc:
        problem = FieldProblem(None, f"the body is not valid JSON: {exc}")
        raise InvalidBodyError([problem]) from None


def validate_body(model: type[T], data: Any) -> T:
    try:
        return TypeAdapter(model).validate_python(data)
    except ValidationError as exc:
        raise InvalidBodyError(validation_problems(exc.errors())) from None


# The models json_request_body named, by component name: FastAPI registers only the models
# it reads itself, so app.py adds these to the document's components.
_REQUEST_MODELS: dict[str, type[BaseModel]] = {}


def json_request_body(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """The route's `openapi_extra`: a JSON body of `model` (read by hand, see read_json,
    so FastAPI does not declare it itself), a reference to its component so that
    generated clients get one named class for it and for each model it uses."""
    name = model.__name__
    if _REQUEST_MODELS.setdefault(name, model) is not model:
        raise TypeError(f"two request models are named {name}: a component name must be unique")
    schema = {"$ref": f"{COMPONENTS}{name}"}
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": required, "content": content}}


def request_components() -> dict[str, Any]:
    """The JSON schemas of the request models and of every model they use, by name."""
    _, schemas = models_json_schema(
        [(model, "validation") for model in _REQUEST_MODELS.values()],
        ref_template=COMPONENTS + "{model}",
    )
    definitions: dict[str, Any] = schemas.get("$defs", {})
    return definitions
