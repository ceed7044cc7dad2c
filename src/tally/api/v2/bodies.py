"""Request and response models of the ingestion API, and the one way bodies are read.

Bodies are parsed by hand after authentication (see auth.py): FastAPI would otherwise
validate them first, and a bad body with bad credentials must be a 403.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import orjson
from fastapi import Request
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from tally.api.errors import validation_problems
from tally.core.json_paths import PathSyntaxError, parse_path
from tally.core.names import NAME_MAX_CHARS, name_problem

T = TypeVar("T")


def _valid_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"name {problem}")
    return value


# A source's name, refused here (422) for the reasons the catalogue would refuse it.
SourceName = Annotated[
    str,
    Field(min_length=1, max_length=NAME_MAX_CHARS, description="The source name."),
    AfterValidator(_valid_name),
]


class InvalidBodyError(Exception):
    """A body that is not JSON or does not match its model: rendered as 422."""

    def __init__(self, problems: list[tuple[str | None, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(m for _, m in problems))


class Strict(BaseModel):
    """A request body's model: no unknown fields, and JSON types as declared (pydantic's
    lax mode would take `true` or "1" or 1.0 for an integer)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class FileMapping(Strict):
    url_field: str = Field("file_url", description="Path to the file URL, e.g. `items[0].url`.")
    filename_field: str = Field("filename", description="Path to the file name.")

    @field_validator("url_field", "filename_field")
    @classmethod
    def _path(cls, value: str) -> str:
        try:
            parse_path(value)
        except PathSyntaxError as exc:
            raise ValueError(str(exc)) from None
        return value


class BasicAuthCredentials(Strict):
    type: Literal["basic_auth"]
    username: str = Field(min_length=1)
    password: str


class ApiKeyCredentials(Strict):
    type: Literal["api_key"]
    api_key: str = Field(min_length=1)


class BearerCredentials(Strict):
    type: Literal["bearer"]
    token: str = Field(min_length=1)


DownloadCredentials = Annotated[
    BasicAuthCredentials | ApiKeyCredentials | BearerCredentials, Field(discriminator="type")
]


class ResponseConfig(Strict):
    status_code: int = Field(200, ge=200, le=299, description="Status code of the reply.")
    content_type: str = Field("application/json", min_length=1, max_length=200)
    body: dict[str, Any] = Field(
        default_factory=lambda: {"status": "accepted"},
        description="Body of the reply, sent verbatim.",
    )


class WebhookConfig(Strict):
    file_mapping: FileMapping = Field(default_factory=FileMapping)
    credentials: DownloadCredentials | None = Field(
        None, description="Omit for public or pre-signed URLs."
    )
    response_config: ResponseConfig = Field(default_factory=ResponseConfig)


class NotificationConfigBody(Strict):
    url: str = Field(
        pattern=r"^https?://",
        max_length=2000,
        description="Where tally POSTs status notifications.",
    )
    secret: str | None = Field(None, description="Standard Webhooks secret (whsec_...).")
    events: (
        list[Literal["file.accepted", "file.delivered", "file.duplicate", "file.failed"]] | None
    ) = Field(None, description="Event types to send; all when omitted.")


class WebhookCreateBody(Strict):
    name: SourceName
    webhook: WebhookConfig
    folder_id: int | None = None
    notification_config: NotificationConfigBody | None = None


class WebhookCreatedResponse(BaseModel):
    id: int = Field(description="The source id.")
    name: str = Field(description="The source name.")
    webhook_id: str = Field(
        description="Goes in the path of every notification. "
        "A credential: store it like a password."
    )


async def read_json(request: Request, *, max_bytes: int) -> Any:
    """The body as JSON, refusing more than max_bytes without reading it all."""
    size = 0
    chunks = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise InvalidBodyError([(None, f"the body is larger than {max_bytes} bytes")])
        chunks.append(chunk)
    try:
        return orjson.loads(b"".join(chunks))
    except orjson.JSONDecodeError as exc:
        raise InvalidBodyError([(None, f"the body is not valid JSON: {exc}")]) from None


def validate_body(model: type[T], data: Any) -> T:
    try:
        return TypeAdapter(model).validate_python(data)
    except ValidationError as exc:
        raise InvalidBodyError(validation_problems(exc.errors())) from None


def request_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with its $defs inlined: a request body given through
    openapi_extra is not registered among the document's components."""
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items() if k != "$defs"}
        return [inline(v) for v in node] if isinstance(node, list) else node

    inlined: dict[str, Any] = inline(schema)
    return inlined


def json_request_body(model: type[BaseModel]) -> dict[str, Any]:
    """The route's `openapi_extra`: a required JSON body of `model` (read by hand, see
    read_json, so FastAPI does not declare it itself)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": request_schema(model)}},
        }
    }
