"""GET /api/v1/resources/{resource_id}/data: the rows of a resource, per the spec."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from tally.api.compression import json_body_response
from tally.api.errors import v1_responses
from tally.api.queries.runner import QueryRunner
from tally.core import errors
from tally.core.filters import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, RESERVED_PARAMETERS
from tally.services.data_query import DataRequest

router = APIRouter(prefix="/api/v1", tags=["Data API"])
# ASCII digits only: int() alone would also take "1_0", " 7" or non-ASCII digits.
INTEGER_PATTERN = re.compile(r"[+-]?[0-9]+")
# Header values lose the spaces and tabs around them (RFC 9110, 5.5); not every HTTP
# parser strips the trailing ones.
HEADER_SPACE = " \t"


def _digits_only(value: object) -> object:
    """The spec's "non-numeric" read literally: pydantic's int() takes "1_0" and " 7"."""
    if isinstance(value, str) and not INTEGER_PATTERN.fullmatch(value):
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


# After Path(...)/Query(...) in each Annotated: FastAPI (0.165) keeps the constraints
# (ge=1, hence `minimum` in the OpenAPI document) only of a FieldInfo that comes first.
Numeric = BeforeValidator(_digits_only)


class PageMeta(BaseModel):
    page: int = Field(description="Page returned.")
    page_size: int = Field(description="Page size actually applied, after capping.")
    returned_count: int = Field(description="Number of rows in this response.")
    total_count: int = Field(description="Rows matching the filters across the resource.")
    total_pages: int = Field(description="total_count divided by page_size, rounded up.")


class DataPageResponse(BaseModel):
    data: list[dict[str, Any]] = Field(
        description="The rows, keyed by column name; empty when nothing matched. Decimals "
        "are JSON numbers with their exact digits; dates and timestamps are ISO 8601."
    )
    meta: PageMeta


DESCRIPTION = """
Rows of a source, reconciliation output or transformation.

**Filters**: any query parameter other than `page`, `page_size`, `fields` and `ordering`
filters on the column of that name (case-sensitive; names may contain dots):
`column=value` and `column__exact=value` (equal), `column__gt`, `__gte`, `__lt`, `__lte`
(comparisons), `column__in=a,b,c` (any of). Several filters combine with AND. Values are
parsed by the column's type (integer, decimal, date `YYYY-MM-DD`, timestamp ISO 8601,
boolean `true`/`false`, text); an empty value (`column=`) matches missing values.

**Order**: without `ordering`, rows come in insertion order, so paging never repeats or
skips a row. With `ordering=col` or `ordering=-col`, ties break on insertion order in the
same direction; missing values sort first ascending and last descending.

**Paging**: offset-based; page N skips (N-1) x page_size rows. The last page is reached
when `returned_count` is lower than `page_size`. `ordering=_row` is the unique ordering
the specification asks paging clients to use.

**System columns**: every resource has `_row`, the row's id (an integer, unique,
increasing in insertion order), and a source has `_file_id`, the id of the
file whose delivery or upload inserted the row (`GET /api/v2/sources/{id}/files/{file_id}`;
null for rows of `tally admin load` and rows loaded before tally kept it). Neither is
among the default columns: name them in `fields`, filters (`_row__gt=1000`,
`_file_id=42`, integers) and `ordering`. A resource column with the same label keeps the
name. On a reconciliation or transformation output, `_file_id` is an unknown column (400).

**Caching**: identical requests are served from a cache for five minutes, but a new
delivery of data is visible at once (the cache is keyed by the resource's data version).

`workspace_id` is a header; sent in the query string it is rejected with 422.
"""

ERRORS = (
    RequestValidationError,
    errors.InvalidWorkspaceHeaderError,
    errors.UnknownFilterFieldError,
    errors.UnknownFieldError,
    errors.UnknownOrderingFieldError,
    errors.UnsupportedOperatorError,
    errors.QueryNotApplicableError,
    errors.InvalidCredentialsError,
    errors.ResourceOwnershipError,
    errors.WorkspaceNotFoundError,
    errors.ResourceNotFoundError,
    errors.StorageError,
    errors.BusyError,
)

FILTERS_OPENAPI: dict[str, Any] = {
    "parameters": [
        {
            "name": "filters",
            "in": "query",
            "required": False,
            "style": "form",
            "explode": True,
            "description": "Column filters: `col`, `col__exact`, `col__gt`, `col__gte`, "
            "`col__lt`, `col__lte`, `col__in` (comma-separated).",
            "schema": {"type": "object", "additionalProperties": {"type": "string"}},
        }
    ],
}


@router.get(
    "/resources/{resource_id}/data",
    summary="Read the rows of a resource",
    description=DESCRIPTION,
    response_model=None,
    responses={
        200: {"model": DataPageResponse, "description": "A page of rows."},
        **v1_responses(*ERRORS),
    },
    openapi_extra=FILTERS_OPENAPI,
)
async def read_resource_data(
    request: Request,
    resource_id: Annotated[int, Path(description="Resource id."), Numeric],
    workspace_id: Annotated[
        str,
        Header(
            alias="workspace_id",
            convert_underscores=False,
            description="Numeric id of the owning workspace.",
        ),
    ],
    x_api_key: Annotated[str | None, Header(alias="X-API-Key", description="API key.")] = None,
    page: Annotated[int, Query(ge=1, description="One-based page number."), Numeric] = 1,
    page_size: Annotated[
        int,
        Query(
            ge=1,
            description=f"Rows per page, at most {MAX_PAGE_SIZE}"
            " (higher values are capped silently).",
        ),
        Numeric,
    ] = DEFAULT_PAGE_SIZE,
    fields: Annotated[
        str | None,
        Query(
            description="Comma-separated columns to return; the system columns `_row` "
            "and `_file_id` only when named."
        ),
    ] = None,
    ordering: Annotated[
        str | None,
        Query(description="A column; `-` prefix: descending. `_row`: the unique order."),
    ] = None,
) -> Response:
    if "workspace_id" in request.query_params:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("query", "workspace_id"),
                    "msg": "workspace_id must be sent as a header, not in the query string",
                    "input": request.query_params["workspace_id"],
                }
            ]
        )
    workspace_id = workspace_id.strip(HEADER_SPACE)
    if not INTEGER_PATTERN.fullmatch(workspace_id):
        raise errors.InvalidWorkspaceHeaderError()
    workspace = int(workspace_id)
    queries: QueryRunner = request.app.state.queries
    filters = [
        (k, v) for k, v in request.query_params.multi_items() if k not in RESERVED_PARAMETERS
    ]
    encoded = await queries.read(
        DataRequest(
            resource_id=resource_id,
            workspace_id=workspace,
            api_key=None if x_api_key is None else x_api_key.strip(HEADER_SPACE),
            filters=filters,
            fields=fields,
            ordering=ordering,
            page=page,
            page_size=page_size,
        ),
        request.headers.get("accept-encoding"),
    )
    return json_body_response(encoded)
