"""A source's declared columns and file layout as a body reads them: `POST /api/v2/sources`
and `POST /api/v2/webhooks` (their `columns`, `skip_leading_lines`,
`skip_trailing_lines`) and `tally admin load --columns FILE`, refused for the same
reasons in the same words (core/bodies.py), each fault named by its path
(`columns[1].format`). What the formats mean is core/formats.py's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.config import JsonDict, JsonValue

from tally.core.bodies import WHOLE_NUMBER, Strict
from tally.core.columns import Column, ColumnType
from tally.core.formats import (
    DATE_FORMAT_MAX_CHARS,
    ColumnFormat,
    FileLayout,
    NumberFormat,
    parse_date_format,
)

DEFAULT_DECIMAL_SCALE = 2
MAX_DECIMAL_SCALE = 18  # a scaled decimal is a 64-bit integer
COLUMN_NAME_MAX_CHARS = 1000
MAX_COLUMNS = 1000
MAX_SKIPPED_LINES = 1000
_DATED = ("date", "timestamp")
_NUMBERS = ("decimal", "integer")

# Refused by the server and stated in the schema: a rule of one field on another.
# (The format's grammar and a separator equal to the other are refused, not stated.)
_FITS: list[JsonValue] = [
    {
        "anyOf": [
            {"properties": {"type": {"enum": list(types)}}},
            {"properties": {option: {"type": "null"}}},
        ]
    }
    for types, option in (
        (("decimal",), "scale"),
        (("timestamp",), "timezone"),
        (_DATED, "format"),
        (_NUMBERS, "decimal_separator"),
        (_NUMBERS, "thousands_separator"),
        (_NUMBERS, "negative"),
    )
]
_FITS.append(  # a formatted timestamp has no UTC offset
    {
        "anyOf": [
            {"properties": {"format": {"type": "null"}}},
            {"properties": {"timezone": {"enum": [False, None]}}},
        ]
    }
)
_OPTIONS_FIT_TYPE: JsonDict = {"allOf": _FITS}
NegativeForm = Literal["minus", "trailing_minus", "parentheses", "dr_cr"]


class ColumnBody(Strict):
    model_config = ConfigDict(json_schema_extra=_OPTIONS_FIT_TYPE)

    name: str = Field(min_length=1, max_length=COLUMN_NAME_MAX_CHARS)
    type: ColumnType = Field(strict=False)  # its values are JSON strings
    scale: Annotated[int, Field(ge=0, le=MAX_DECIMAL_SCALE), WHOLE_NUMBER] | None = Field(
        None, description="Fractional digits (decimal only; default 2)."
    )
    timezone: bool | None = Field(None, description="Values carry UTC offsets (timestamp only).")
    format: str | None = Field(
        None,
        min_length=1,
        max_length=DATE_FORMAT_MAX_CHARS,
        description="Date and timestamp only: how the file writes the values, in tokens "
        "`YYYY`, `MM`, `DD` (two digits), `M`, `D` (one or two), `HH`, `H`, `mm`, `ss` "
        "and the literals `/ . - : , T` and space: `DD/MM/YYYY`, `MM/DD/YYYY`, `YYYYMMDD`, "
        "`DD.MM.YYYY`, `DD/MM/YYYY HH:mm:ss`. Default: ISO 8601 (`YYYY-MM-DD`). A value "
        "that does not fit fails the file, naming line, column and value.",
    )
    decimal_separator: Literal[".", ","] | None = Field(
        None, description="Decimal and integer only: `.` (default) or `,`."
    )
    thousands_separator: Literal["", ",", ".", " ", "'", "\u00a0", "\u202f"] | None = Field(
        None,
        description="Decimal and integer only: none (default), `,`, `.`, `'` or a space "
        "(a space, U+00A0 and U+202F are each taken for any of the three); must differ from "
        "`decimal_separator`. Digits between separators come in threes (`1.234.567,89`).",
    )
    negative: list[NegativeForm] | None = Field(
        None,
        min_length=1,
        max_length=4,
        description="Decimal and integer only: the forms a negative value may take: "
        "`minus` (`-12.50`, the default), `trailing_minus` (`12.50-`), `parentheses` "
        "(`(12.50)`), `dr_cr` (`12.50 DR` negative, `12.50 CR` positive, any case, the "
        "space optional).",
    )

    @model_validator(mode="after")
    def _options_fit_type(self) -> ColumnBody:
        if self.scale is not None and self.type != "decimal":
            raise ValueError("scale applies to decimal columns only")
        if self.timezone is not None and self.type != "timestamp":
            raise ValueError("timezone applies to timestamp columns only")
        return self

    @field_validator("format")
    @classmethod
    def _date_format(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("type")
        if kind not in _DATED:
            raise ValueError("format applies to date and timestamp columns only")
        parsed = parse_date_format(value)  # its ValueError names what is wrong
        if kind == "date" and parsed.has_time:
            raise ValueError("a date column's format has no time (HH, mm, ss)")
        if info.data.get("timezone"):
            raise ValueError("a formatted timestamp has no UTC offset: leave timezone out")
        return value

    @field_validator("decimal_separator", "thousands_separator", "negative")
    @classmethod
    def _number_option(cls, value: object, info: ValidationInfo) -> object:
        if info.data.get("type") not in _NUMBERS:
            raise ValueError(f"{info.field_name} applies to decimal and integer columns only")
        if info.field_name == "thousands_separator" and value == (
            info.data.get("decimal_separator") or "."
        ):
            raise ValueError("thousands_separator must differ from decimal_separator")
        if (
            info.field_name == "negative"
            and isinstance(value, list)
            and len(set(value)) < len(value)
        ):
            raise ValueError("a form appears twice")
        return value

    def column_format(self) -> ColumnFormat | None:
        """The column's declared format; None: the clean form (ISO dates, `-12.50`)."""
        if self.format is not None:
            return ColumnFormat(date=self.format)
        if (self.decimal_separator, self.thousands_separator, self.negative) == (None,) * 3:
            return None
        return ColumnFormat(
            number=NumberFormat(
                self.decimal_separator or ".",
                self.thousands_separator or "",
                tuple(self.negative or ("minus",)),
            )
        )


Columns = Annotated[
    list[ColumnBody],
    Field(
        min_length=1,
        max_length=MAX_COLUMNS,
        description="Typed columns: every file must bring exactly these (in any order). "
        "Omit for a placeholder source that takes its columns from the first file. A "
        "column may say how its file writes its values (`format`, `decimal_separator`, "
        "`thousands_separator`, `negative`).",
    ),
]
SkippedLines = Annotated[int, Field(ge=0, le=MAX_SKIPPED_LINES), WHOLE_NUMBER]
SKIP_LEADING = (
    "Lines at the top of every file to skip before its header (a bank's account and period "
    "lines), whatever they hold. Default 0."
)
SKIP_TRAILING = (
    "Records at the end of every file to skip (a bank's totals), whatever their number of "
    "fields; blank lines are not counted. Default 0."
)


def declared_column(
    position: int, name: str, kind: ColumnType, *, scale: int | None, timezone: bool
) -> Column:
    """A declared column as stored: physical name c<position>, decimal scale 2 unless set."""
    if kind is not ColumnType.DECIMAL:
        scale = 0
    timezone = timezone and kind is ColumnType.TIMESTAMP
    scale = DEFAULT_DECIMAL_SCALE if scale is None else scale
    return Column(name, f"c{position}", kind, scale, timezone)


MODE_DESCRIPTION = (
    "`append` (the default): each file's rows are added to the source's. `replace`: each "
    "file is a snapshot (an ERP's whole ledger, exported daily) and replaces all the "
    "source's rows in one transaction; readers see the old rows or the new, never a mix. "
    "Manual reconciliation work on rows that come back unchanged is carried to their new "
    "positions; work whose rows are gone is retired with the reason. The same bytes as the "
    "snapshot the source holds are a duplicate; an earlier snapshot's bytes are loaded again."
)


class DeclaredLayout(Strict):
    """The fields a body declaring a source's columns and file layout holds (the source
    and webhook bodies, and the file of `tally admin load --columns`)."""

    columns: Columns | None = None
    skip_leading_lines: SkippedLines = Field(0, description=SKIP_LEADING)
    skip_trailing_lines: SkippedLines = Field(0, description=SKIP_TRAILING)
    mode: Literal["append", "replace"] = Field("append", description=MODE_DESCRIPTION)

    @field_validator("columns")
    @classmethod
    def _unique(cls, columns: list[ColumnBody] | None) -> list[ColumnBody] | None:
        seen: set[str] = set()
        for column in columns or []:
            if column.name in seen:
                raise ValueError(f"the column name {column.name!r} appears twice")
            seen.add(column.name)
        return columns

    def declared_columns(self) -> tuple[Column, ...] | None:
        """The declared columns as stored; None: a placeholder source."""
        if self.columns is None:
            return None
        return tuple(
            declared_column(n, c.name, c.type, scale=c.scale, timezone=bool(c.timezone))
            for n, c in enumerate(self.columns)
        )

    def file_layout(self) -> FileLayout:
        """The layout the body declares."""
        formats = []
        for column in self.columns or []:
            if (fmt := column.column_format()) is not None:
                formats.append((column.name, fmt))
        return FileLayout(self.skip_leading_lines, self.skip_trailing_lines, tuple(formats))


class DeclaredSource(DeclaredLayout):
    """What `tally admin load --columns FILE` reads: an object with the columns and,
    optionally, the lines to skip."""

    columns: Columns
