"""The resource table (screen 2 of issue #33): any resource's rows as the Data API gives
them (`DataQueryService.read_rows`, one page at a time, in a query process), sorted,
filtered and paged by its URL, and "Export CSV" of the whole view, streamed
(`RowExport`).

A request the Data API refuses (an unknown column, a value its column cannot hold) is
the page again with the API's own message beside the filters, answered 400."""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, Iterable
from typing import Annotated, Protocol
from urllib.parse import parse_qsl, quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from tally.console.auth import SignedIn, runtime_of
from tally.console.overview import KIND_LABELS, kind_page
from tally.console.pages import not_found_page, render
from tally.console.table_view import OPERATOR_CHOICES, PAGE_SIZES, BadViewError, TableView
from tally.core.columns import Column, ColumnType
from tally.core.errors import InvalidRequestError, ResourceNotFoundError
from tally.core.users import User
from tally.services.workspace_rows import RowsPage, RowsRequest, row_values

router = APIRouter(include_in_schema=False)
NUMERIC = frozenset({ColumnType.INTEGER, ColumnType.DECIMAL})
# A file name any system keeps: letters, digits, and a few marks; the rest become `_`.
UNSAFE_IN_FILE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")
MAX_FILE_NAME_CHARS = 100
SLASHES = re.compile(r"[/\\]")


def _request(user: User, resource_id: int, view: TableView) -> RowsRequest:
    return RowsRequest(
        resource_id=resource_id,
        workspace_id=user.workspace_id,
        filters=view.filters,
        fields=view.fields,
        ordering=view.ordering,
        page=view.page,
        page_size=view.page_size,
    )


class RowsReader(Protocol):
    """What reads the table's page: the API's query runner (`app.state.queries`), so the
    page is read where Data API requests are (a query process, its caches and column
    snapshots), never by building them again in the API process."""

    async def read_rows(self, request: RowsRequest) -> RowsPage: ...


@router.get("/console/resources/{resource_id}")
async def table_page(request: Request, user: SignedIn, resource_id: int) -> Response:
    """A resource's facts, then its rows; another workspace's is answered as a missing one."""
    listing = runtime_of(request).listing
    try:
        resource = await run_in_threadpool(
            listing.get, workspace_id=user.workspace_id, resource_id=resource_id
        )
    except ResourceNotFoundError:
        return await run_in_threadpool(not_found_page, request)
    reader: RowsReader = request.app.state.queries
    error, rows, view = None, None, None
    try:
        view = TableView.of(request.query_params.multi_items())
        rows = await reader.read_rows(_request(user, resource_id, view))
    except (BadViewError, InvalidRequestError) as refused:
        error = str(refused)
    except ResourceNotFoundError:  # removed since the line above
        return await run_in_threadpool(not_found_page, request)
    view = view or TableView(tuple(request.query_params.multi_items()), None, None)
    return await run_in_threadpool(
        render,
        request,
        "resource_table.html",
        user=user,
        status_code=200 if error is None else 400,
        title=resource.name,
        resource=resource,
        kinds=KIND_LABELS,
        kind_page=kind_page(resource),
        view=view,
        error=error,
        table=None if rows is None else _table(rows, view),
        columns=[c.name for c in (*resource.columns, *_system(rows))],
        chosen=[c.name for c in (rows.query.fields if rows else resource.columns)],
        operators=OPERATOR_CHOICES,
        page_sizes=PAGE_SIZES,
    )


@router.get("/console/resources/{resource_id}/view")
def change_view(
    request: Request,
    user: SignedIn,
    resource_id: int,
    view: str = "",
    change: str = "",
    column: str = "",
    operator: str = "",
    value: str = "",
    field: Annotated[list[str] | None, Query()] = None,
    every: Annotated[list[str] | None, Query()] = None,
) -> Response:
    """A form's choice written into the view's URL, in the Data API's grammar, and the
    browser sent there: a filter added (`column`, `operator`, `value`) or the columns
    chosen (`field`, of `every` column offered). `view` is the query string the form
    was shown with. Nothing is read here; the table page checks it all."""
    try:
        current = TableView.of(parse_qsl(view, keep_blank_values=True))
    except BadViewError:
        current = TableView(tuple(parse_qsl(view, keep_blank_values=True)), None, None)
    if change == "columns":
        query = current.with_fields(field or [], every or [])
    elif change == "filter" and column:
        query = current.with_filter(column, operator, value)
    else:
        query = current.query()
    target = f"/console/resources/{resource_id}" + (f"?{query}" if query else "")
    return RedirectResponse(target, status_code=303)


@router.get("/console/resources/{resource_id}/export.csv")
def export_csv(request: Request, user: SignedIn, resource_id: int) -> Response:
    """Every row of the view (its page and page size ignored), streamed; a viewer may."""
    try:
        view = TableView.of(request.query_params.multi_items())
        export = runtime_of(request).exports.open(_request(user, resource_id, view))
    except ResourceNotFoundError:
        return not_found_page(request)
    except (BadViewError, InvalidRequestError) as refused:
        return PlainTextResponse(str(refused), status_code=400)
    return csv_download(export.chunks, export.name)


def file_name(name: str) -> str:
    """The resource's name as an ASCII file name: no quote, slash or control character."""
    safe = UNSAFE_IN_FILE_NAME.sub("_", name).strip(" .")[:MAX_FILE_NAME_CHARS]
    return safe or "export"


def csv_download(chunks: Iterable[bytes] | AsyncIterable[bytes], name: str) -> Response:
    """A streamed CSV body, saved by the browser as `name`.csv (`content_disposition`):
    the resource table's, the Exceptions view's and the History's exports."""
    return StreamingResponse(
        chunks,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": content_disposition(name)},
    )


def content_disposition(name: str) -> str:
    """An attachment named after the resource: the ASCII name, and the name itself
    (RFC 6266 `filename*`, percent-encoded UTF-8, slashes made `_`) for browsers that
    read it, so `Überweisungen (EUR)` stays that."""
    whole = SLASHES.sub("_", name).strip(" .")[:MAX_FILE_NAME_CHARS] or "export"
    return (
        f'attachment; filename="{file_name(name)}.csv"; '
        f"filename*=UTF-8''{quote(whole + '.csv', safe='')}"
    )


def _system(rows: RowsPage | None) -> tuple[Column, ...]:
    return () if rows is None else rows.system_columns


def _table(rows: RowsPage, view: TableView) -> dict[str, object]:
    names = [c.name for c in rows.query.fields]
    first = (view.page - 1) * rows.query.page_size
    last_page = max(1, -(-rows.total // rows.query.page_size))
    return {
        "header": [(c.name, c.type in NUMERIC) for c in rows.query.fields],
        "numeric": [c.type in NUMERIC for c in rows.query.fields],
        "rows": [row_values(row, names) for row in rows.rows],
        "first": first + 1,
        "last": first + len(rows.rows),
        "total": rows.total,
        "page": view.page,
        "last_page": last_page,
    }
