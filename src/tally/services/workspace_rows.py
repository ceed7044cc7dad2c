"""A workspace member's reads of a resource's rows (the console): the Data API's query
grammar (and one condition of the console's own, `contains`), authorised by the
signed-in user's workspace instead of an API key, and each row's values as the exact
text the Data API's JSON carries (never a float).

The page is read by `DataQueryService.read_rows`, the whole view by `RowExport`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Connection

from tally.core.columns import Column
from tally.core.errors import ResourceNotFoundError, UnknownFilterFieldError
from tally.core.filters import RowQuery, contains_condition, parse_row_query
from tally.storage.resources import Resource, find_resource


@dataclass(frozen=True)
class RowsRequest:
    """The Data API's parameters, for `workspace_id`'s member (who signed in already)."""

    resource_id: int
    workspace_id: int
    filters: Sequence[tuple[str, str]]
    fields: str | None
    ordering: str | None
    page: int = 1
    page_size: int = 1
    # (data version, rows matching the filters) when the caller knows it exactly at that
    # version: a count not made again (ignored at any other version)
    known_total: tuple[int, int] | None = None
    # (column name, text): the column contains the text, case-insensitively (the
    # console's reference search); a condition no Data API query string can express
    contains: tuple[str, str] | None = None
    # the resource's indexes serve the query (a few rows named by id; a reconciliation's
    # open rows, filtered and ordered on a side's date or amount, which have partial
    # indexes of their own): no column snapshot is built for it, which at each new data
    # version would read the whole resource (at 1M rows seconds of a query process's
    # CPU, and the workbench makes a new version at each action)
    by_indexes: bool = False


@dataclass(frozen=True)
class RowsPage:
    columns: tuple[Column, ...]  # the resource's own columns, in order
    system_columns: tuple[Column, ...]  # `_row` (and a source's `_file_id`)
    query: RowQuery  # as parsed: the page's fields, its ordering, the page size applied
    rows: list[str]  # JSON object texts, as the Data API's `data` holds them
    total: int  # rows matching the filters


def authorised_query(conn: Connection, request: RowsRequest) -> tuple[Resource, RowQuery]:
    """The resource (another workspace's is a missing one: ResourceNotFoundError, so a
    URL tells nobody what exists elsewhere) and the request parsed against its columns
    (the Data API's errors, with its texts), with the request's `contains`."""
    resource = find_resource(conn, request.resource_id)
    if resource is None or resource.workspace_id != request.workspace_id:
        raise ResourceNotFoundError()
    query = resource_query(resource, request)
    if request.contains is None:
        return resource, query
    name, text = request.contains
    by_name = {c.name: c for c in (*resource.system_columns, *resource.columns)}
    if name not in by_name:
        raise UnknownFilterFieldError(name)
    return resource, query.with_condition(contains_condition(by_name[name], text))


class QueryParameters(Protocol):
    """The Data API's parameters, as a DataRequest and a RowsRequest both carry them."""

    @property
    def filters(self) -> Sequence[tuple[str, str]]: ...
    @property
    def fields(self) -> str | None: ...
    @property
    def ordering(self) -> str | None: ...
    @property
    def page(self) -> int: ...
    @property
    def page_size(self) -> int: ...


def resource_query(resource: Resource, request: QueryParameters) -> RowQuery:
    """The request parsed against the resource's columns (the Data API's 400s)."""
    return parse_row_query(
        resource.columns,
        request.filters,
        fields=request.fields,
        ordering=request.ordering,
        page=request.page,
        page_size=request.page_size,
        system=resource.system_columns,
    )


def _text(value: object) -> str | None:
    """A JSON value as text: numbers keep their digits (parsed as text, never floats),
    booleans `true`/`false`, a missing value None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def row_values(row: str, names: Sequence[str]) -> list[str | None]:
    """One row's JSON object text as the texts of its values under `names`."""
    values = json.loads(row, parse_float=str, parse_int=str)
    return [_text(values.get(name)) for name in names]
