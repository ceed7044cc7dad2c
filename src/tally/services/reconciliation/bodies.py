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

from pydantic import Discriminator, Field, Tag
from pydantic.config import JsonDict

from tally.core.bodies import Name, Strict, WholeNumber, parsed
from tally.core.errors import FieldProblem, InvalidBodyError
from tally.core.reconciliation import Normalizer, PassType

SIDE_NAME_PATTERN = "^[A-Za-z0-9_-]{1,40}$"
REASON_CODE_PATTERN = SIDE_NAME_PATTERN  # a resolution's reason code: `bank_fee`
MAX_RESOLUTION_REASONS = 50
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


class CreditDebitBody(Strict):
    """An amount kept in two columns (a bank export's `Credit` and `Debit`)."""

    credit: _ColumnName = Field(
        description="A decimal or integer column: money in, added (an empty cell is 0)."
    )
    debit: _ColumnName = Field(
        description="A decimal or integer column: money out, subtracted (an empty cell is "
        "0); another column than `credit`."
    )


# The two forms of a side's amount, told apart by their JSON type; the tags name the forms
# in pydantic's error paths only, and parse_definition takes them out of the paths it gives.
_ONE_COLUMN, _TWO_COLUMNS = "column", "credit_debit"


def _amount_form(value: Any) -> str | None:
    if isinstance(value, str):
        return _ONE_COLUMN
    return _TWO_COLUMNS if isinstance(value, dict) else None


AmountBody = Annotated[
    Annotated[_ColumnName, Tag(_ONE_COLUMN)] | Annotated[CreditDebitBody, Tag(_TWO_COLUMNS)],
    Discriminator(
        _amount_form,
        custom_error_type="amount_form",
        custom_error_message='a column name, or {"credit": column, "debit": column}',
    ),
]


class SideBody(Strict):
    name: str = Field(
        description="Prefixes the side's columns in the output (`bank.amount`): 1 to 40 "
        "letters, digits, `_` or `-`.",
        json_schema_extra={"pattern": SIDE_NAME_PATTERN},
    )
    resource_id: WholeNumber = Field(description="A resource of the workspace.")
    amount: AmountBody | None = Field(
        None,
        description="The signed amount: a decimal or integer column, or two of them, "
        '`{"credit": "Credit", "debit": "Debit"}`, read as credit minus debit (an empty '
        "cell is 0; both empty: the row has no amount). Both sides name one or neither.",
    )
    date: _ColumnName | None = Field(None, description="A date or timestamp column.")
    currency: _ColumnName | None = Field(
        None,
        description="A text column holding each row's currency (compared trimmed and "
        "upper-cased): rows of different currencies never match, and a row whose currency "
        "is empty matches nothing automatically. Both sides name one or neither, and it "
        "needs an amount. No conversion at a rate.",
    )


class ReconciliationDefinitionBody(Strict):
    name: Name = Field(description="Also the name of the output resource.")
    left: SideBody
    right: SideBody
    passes: list[PassBody] = Field(
        max_length=MAX_PASSES,
        description="Run in order; a row matched by one pass is taken by no later one.",
        json_schema_extra={"minItems": 1},
    )
    resolution_reasons: list[str] | None = Field(
        None,
        max_length=MAX_RESOLUTION_REASONS,
        description="The reason codes an analyst may close a row with when it has no "
        "counterpart (POST .../resolutions): 1 to 40 letters, digits, `_` or `-` each, "
        "no code twice. Default: `bank_fee`, `timing`, `duplicate`, `write_off`.",
        json_schema_extra={
            "items": {"type": "string", "pattern": REASON_CODE_PATTERN},
            "minItems": 1,
            "uniqueItems": True,
        },
    )


def parse_definition(data: Any) -> ReconciliationDefinitionBody:
    """The body as its model, or InvalidBodyError naming each field at fault, by its
    path as the client wrote it (`left.amount.credit`, never the form's tag)."""
    try:
        return parsed(ReconciliationDefinitionBody, data)
    except InvalidBodyError as exc:
        raise InvalidBodyError([_untagged(p) for p in exc.problems]) from None


def _untagged(problem: FieldProblem) -> FieldProblem:
    """`left.amount.credit_debit.credit` -> `left.amount.credit`, `left.amount.column` ->
    `left.amount`."""
    field = problem.field
    if field is None:
        return problem
    for tag in (_ONE_COLUMN, _TWO_COLUMNS):
        for side in ("left", "right"):
            tagged = f"{side}.amount.{tag}"
            if field == tagged or field.startswith(tagged + "."):
                field = f"{side}.amount" + field[len(tagged) :]
    return FieldProblem(field, problem.message)
