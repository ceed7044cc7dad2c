"""The webhook API's models (POST /api/v2/webhooks): where a notification's file URL and
name are read, the download's credentials, the reply, and the created webhook."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from tally.api.v2.source_bodies import NotificationConfigBody, SourceEncoding, SourceName
from tally.core.bodies import SPACE_CLASS, Strict, WholeNumber
from tally.core.encodings import DEFAULT_ENCODING
from tally.core.json_paths import PathSyntaxError, parse_path
from tally.core.source_bodies import DeclaredLayout

_KEY, _KEY_END = "[^.\\[\\]]", f"[^.\\[\\]{SPACE_CLASS}]"
_INDEX = "\\[[0-9]+\\]"
PATH_PATTERN = (  # json_paths.parse_path's grammar, with no space at either end
    f"^(?:{_INDEX}|{_KEY_END}|{_KEY_END}{_KEY}*{_KEY_END}"
    f"|(?:{_INDEX}|{_KEY_END}{_KEY}*)(?:\\.?(?:{_INDEX}|{_KEY}+))*\\.?(?:{_INDEX}|{_KEY}*{_KEY_END}))$"
)


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


class WebhookRotatedResponse(BaseModel):
    id: int = Field(description="The source id.")
    webhook_id: str = Field(
        description="The webhook's new id, shown this once (only its hash is kept): "
        "notifications must use it from now on; the old id answers 404."
    )
