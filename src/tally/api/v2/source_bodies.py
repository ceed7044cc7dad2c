"""The source API's models (POST /api/v2/sources, its upload flow), and the parts a
webhook's source shares: its name, encoding and status callbacks. The declared columns
and file layout, which `tally admin load` reads too, are core/source_bodies.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from tally.core.bodies import Name, Strict, WholeNumber
from tally.core.encodings import (
    DEFAULT_ENCODING,
    DOCUMENTED_SPELLINGS,
    FILE_ENCODINGS,
    canonical_encoding,
)
from tally.core.encodings import NAME_MAX_CHARS as ENCODING_MAX_CHARS
from tally.core.source_bodies import DeclaredLayout

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


class NotificationConfigBody(Strict):
    url: str = Field(
        pattern=r"^https?://",
        max_length=2000,
        description="Where tally POSTs status callbacks.",
    )
    secret: str | None = Field(None, description="Standard Webhooks secret (whsec_...).")
    events: (
        list[
            Literal[
                "file.accepted", "file.delivered", "file.duplicate", "file.failed", "file.retracted"
            ]
        ]
        | None
    ) = Field(None, description="Event types to send; all when omitted.")


class SourceCreateBody(DeclaredLayout):
    name: SourceName
    folder_id: WholeNumber | None = None
    encoding: SourceEncoding = DEFAULT_ENCODING
    notification_config: NotificationConfigBody | None = None


class SourceCreatedResponse(BaseModel):
    id: int = Field(description="The source id.")
    name: str = Field(description="The source name.")


class UploadAcceptedResponse(BaseModel):
    file_id: int = Field(description="Follow it at GET /api/v2/sources/{id}/files/{file_id}.")
    status: str = Field(description="`queued`, or for a retry the file's current status.")
