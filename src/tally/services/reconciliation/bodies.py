"""A reconciliation definition's body: the JSON types it holds (pydantic models,
read by the API and by the CLI from a file). A body that does not fit them (a wrong JSON
type, a missing or unknown field) is InvalidBodyError, the /api/v2 422, each problem
named by its path as the client wrote it (`passes[1].keys[0].left`).

The values the issue lists as faults of meaning (an unknown pass type or normaliser, a
bad tolerance or window, an empty `passes`, a side name) are plain JSON strings and
arrays here, refused by definitions.py as 400s; the OpenAPI schema still states them
(enums, patterns), for clients and for schemathesis.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field
from pydantic.config import JsonDict

from tally.core.bodies import Name, Strict, WholeNumber, parsed
from tally.core.reconciliation import Normalizer, PassType

SIDE_NAME_PATTERN = "^[A-Za-z0-9_-]{1,40}$"
TOLERANCE_PATTERN = r"^[0-9]{1,15}(\.[0-9]{1,18})?$"  # exact at 18 digits within int64 sums
MAX_WINDOW_DAYS = 36_600  # about a century either way
MAX_PASSES = 50
MAX_KEYS = 20
MAX_NORMALIZERS = 20
COLUMN_NAME_MAX_CHARS = 1000
_ColumnName = Annotated[str, Field(max_length=COLUMN_NAME_MAX_CHARS)]
_WINDOW_SCHEMA: JsonDict = {
    "items": {"type": "integer", "minimum": -MAX_WINDOW_DAYS, "maximum": MAX_WINDOW_DAYS},
    "minItems": 2,
    "maxItems": 2,
}


class KeyBody(Strict):
    left: _ColumnName = Field(description="A column of the left resource.")
    right: _ColumnName = Field(description="A column of the right resource.")
    normalize: list[str] = Field(
        default_factory=list,
        max_length=MAX_NORMALIZERS,
        description="Applied in order to both values before they are compared.",
        json_schema_extra={"items": {"type": "string", "enum": [str(n) for n in Normalizer]}},
    )


class PassBody(Strict):
    name: Name
    type: str = Field(json_schema_extra={"enum": [str(t) for t in PassType]})
    keys: list[KeyBody] = Field(
        default_factory=list,
        max_length=MAX_KEYS,
        description="Columns that must be equal; empty only in a one_to_one pass.",
    )
    amount_tolerance: str = Field(
        "0",
        description="The largest absolute difference of the amounts (or of a group's sum), "
        'as a decimal string, e.g. "0.05". Needs amount columns on both sides.',
        json_schema_extra={"pattern": TOLERANCE_PATTERN},
    )
    date_window: list[Any] = Field(
        default_factory=lambda: [0, 0],
        description="[before, after]: whole days the right date may lie from the left "
        "date, before <= after ([-3, 1]: up to 3 days earlier, 1 day later). Needs date "
        "columns on both sides.",
        json_schema_extra=_WINDOW_SCHEMA,
    )
    auto_confirm: bool = Field(True, description="false: the pass's matches are `suggested`.")


class SideBody(Strict):
    name: str = Field(
        description="Prefixes the side's columns in the output (`bank.amount`): 1 to 40 "
        "letters, digits, `_` or `-`.",
        json_schema_extra={"pattern": SIDE_NAME_PATTERN},
    )
    resource_id: WholeNumber = Field(description="A resource of the workspace.")
    amount: _ColumnName | None = Field(None, description="A decimal or integer column.")
    date: _ColumnName | None = Field(None, description="A date or timestamp column.")


class ReconciliationDefinitionBody(Strict):
    name: Name = Field(description="Also the name of the output resource.")
    left: SideBody
    right: SideBody
    passes: list[PassBody] = Field(
        max_length=MAX_PASSES,
        description="Run in order; a row matched by one pass is taken by no later one.",
        json_schema_extra={"minItems": 1},
    )


def parse_definition(data: Any) -> ReconciliationDefinitionBody:
    """The body as its model, or InvalidBodyError naming each field at fault."""
    return parsed(ReconciliationDefinitionBody, data)
