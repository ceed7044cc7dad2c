"""Request and response models of the ingestion API, and the one way bodies are read.

Bodies are parsed by hand after authentication (see auth.py): FastAPI would otherwise
validate them first, and a bad body with bad credentials must be a 403.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import orjson
from fastapi import Request
from pydantic import AfterValidator, BaseModel, Field, TypeAdapter, ValidationError, field_validator
from pydantic.json_schema import models_json_schema

from tally.api.errors import validation_problems
from tally.core.bodies import SPACE_CLASS, Name, Strict, WholeNumber
from tally.core.encodings import (
    DEFAULT_ENCODING,
    DOCUMENTED_SPELLINGS,
    FILE_ENCODINGS,
    canonical_encoding,
)
from tally.core.encodings import NAME_MAX_CHARS as ENCODING_MAX_CHARS
from tally.core.errors import FieldProblem, InvalidBodyError
from tally.core.json_paths import PathSyntaxError, parse_path
from tally.core.source_bodies import DeclaredLayout

T = TypeVar("T")
COMPONENTS = "#/components/schemas/"

_KEY, _KEY_END = "[^.\\[\\]]", f"[^.\\[\\]{SPACE_CLASS}]"
_INDEX = "\\[[0-9]+\\]"
PATH_PATTERN = (  # json_paths.parse_path's grammar, with no space at either end
    f"^(?:{_INDEX}|{_KEY_END}|{_KEY_END}{_KEY}*{_KEY_END}"
    f"|(?:{_INDEX}|{_KEY_END}{_KEY}*)(?:\\.?(?:{_INDEX}|{_KEY}+))*\\.?(?:{_INDEX}|{_KEY}*{_KEY_END}))$"
)

# A source's name, refused here (422) for the reasons the catalogue would refuse it.
SourceName = Annotated[
    Name, Field(description="The source name: not blank, no control characters.")
]


ENCODING_DESCRIPTION = (
    "The character encoding of the source's CSV files (uploads and downloads): `utf-8` "
    "(the default; a byte-order mark is allowed), `latin-1`, `cp1252`, `utf-16` (byte "
    "order from its byte-order mark, or `utf-16-le` / `utf-16-be`), or another of the "
    "listed encodings; any usual spelling of their names is taken too (`ISO-8859-1`, "
    "`windows-1252`). Files are decoded strictly, never guessed: a file not valid in "
    "this encoding fails, its error naming the line and byte offset of the first bytes "
    "that are not. CSV made from JSON rows is UTF-8 whatever this says."
)
# A source's encoding, folded to the codec's own name; an unknown one is a 422 naming it.
SourceEncoding = Annotated[
    str,
    Field(
        max_length=ENCODING_MAX_CHARS,
        description=ENCODING_DESCRIPTION,
        # the names as stored and the documented `latin-1`; any other spelling of them
        # (`ISO-8859-1`, `windows-1252`) passes too
        json_schema_extra={"enum": sorted(FILE_ENCODINGS | DOCUMENTED_SPELLINGS)},
    ),
    AfterValidator(canonical_encoding),
]


class FileMapping(Strict):
    url_field: str = Field(
        "file_url",
        description="Path to the file URL, e.g. `items[0].url`.",
        json_schema_extra={"pattern": PATH_PATTERN},
    )
    filename_field: str = Field(
        "filename",
        description="Path to the file name.",
        json_schema_extra={"pattern": PATH_PATTERN},
    )

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
    status_code: WholeNumber = Field(200, ge=200, le=299, description="Status code of the reply.")
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
        description="Where tally POSTs status callbacks.",
    )
    secret: str | None = Field(None, description="Standard Webhooks secret (whsec_...).")
    events: (
        list[Literal["file.accepted", "file.delivered", "file.duplicate", "file.failed"]] | None
    ) = Field(None, description="Event types to send; all when omitted.")


class WebhookCreateBody(DeclaredLayout):
    name: SourceName
    webhook: WebhookConfig
    folder_id: WholeNumber | None = None
    notification_config: NotificationConfigBody | None = None
    encoding: SourceEncoding = DEFAULT_ENCODING


class WebhookCreatedResponse(BaseModel):
    id: int = Field(description="The source id.")
    name: str = Field(description="The source name.")
    webhook_id: str = Field(
        description="Goes in the path of every notification. "
        "A credential: store it like a password."
    )


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
