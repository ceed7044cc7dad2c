"""The rules every edge reads a body with (a request's JSON, or a definition file): the
/api/v2 bodies and the reconciliation definition (which the CLI reads from a file too),
so a body is refused for the same reasons, in the same words, wherever it comes in.

Pydantic models, as plain values: no I/O. A body's model says what JSON types it holds;
what those values mean for the workspace (a name already taken, a column that does not
exist) is the services' to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from tally.core.errors import FieldProblem, InvalidBodyError
from tally.core.names import NAME_MAX_CHARS, name_problem


def _valid_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"name {problem}")
    return value


def _whole_number(value: object) -> object:
    """2.0 as 2: JSON Schema (and so the OpenAPI document) calls it an integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def regex_class(characters: str) -> str:
    return "".join(f"\\u{ord(ch):04x}" for ch in characters)


# The characters str.strip() removes, and the control characters names may not hold:
# the schema's patterns state exactly the rules the validators below apply.
SPACE_CLASS = regex_class("".join(chr(c) for c in range(0x10000) if chr(c).isspace()))
_CONTROL = "\\u0000-\\u001f\\u007f"
NAME_PATTERN = f"^[^{_CONTROL}]*[^{_CONTROL}{SPACE_CLASS}][^{_CONTROL}]*$"

# An integer of a body is a whole number however the JSON spells it (never true or "1").
# Put constraints (Field(ge=...)) before it in an Annotated: pydantic then documents them.
WHOLE_NUMBER = BeforeValidator(_whole_number)
WholeNumber = Annotated[int, WHOLE_NUMBER]

# A name people give (a source, a reconciliation): refused for the reasons the catalogue
# would refuse it, with the pattern that says so in the schema.
Name = Annotated[
    str,
    Field(min_length=1, max_length=NAME_MAX_CHARS, json_schema_extra={"pattern": NAME_PATTERN}),
    AfterValidator(_valid_name),
]


class Strict(BaseModel):
    """A body's model: no unknown fields, and JSON types as declared (pydantic's lax
    mode would take `true` or "1" for an integer; WholeNumber takes 1.0, as JSON
    Schema does)."""

    model_config = ConfigDict(extra="forbid", strict=True)


Shape = TypeVar("Shape", bound=BaseModel)


def parsed(model: type[Shape], data: Any) -> Shape:
    """The data as this model, or InvalidBodyError naming each field at fault by its
    path: a definition's body is refused in the same words whatever its kind."""
    try:
        return TypeAdapter(model).validate_python(data)
    except ValidationError as exc:
        problems = [
            FieldProblem(field_path(item["loc"]) or None, item["msg"]) for item in exc.errors()
        ]
        raise InvalidBodyError(problems) from None


def field_path(loc: Sequence[int | str]) -> str:
    """('passes', 1, 'keys', 0, 'left') -> 'passes[1].keys[0].left'."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path
