"""The admins' "New transformation" page: a name, the inputs (a name the SQL reads, and a
resource of the workspace, per row) and the SQL; "Preview" as on a transformation's page
and "Create" through the service `POST /api/v2/transformations` uses (its first run
queued at once). Every problem is shown by the field it names, the form kept."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from tally.console import transformation_view as view
from tally.console.auth import AdminUser, runtime_of
from tally.console.pages import render
from tally.console.sign_in import see_other
from tally.console.transformations import FormText, previewed, typed
from tally.core.errors import DefinitionRejectedError, InvalidBodyError
from tally.core.users import User
from tally.services.resource_listing import MAX_PAGE_SIZE

router = APIRouter(include_in_schema=False)
NEW = "/console/transformations/new"
INPUT_ROWS = 4  # empty input rows offered; more after a Preview that fills them
FormList = Annotated[list[str], Form()]


@router.get(NEW)
def new_page(request: Request, admin: AdminUser) -> Response:
    return _page(request, admin, name="", rows=[], sql="")


@router.post(NEW + "/preview")
async def preview_new(
    request: Request,
    admin: AdminUser,
    name: FormText = "",
    input_name: FormList | None = None,
    input_resource: FormList | None = None,
    sql: FormText = "",
) -> Response:
    rows = _rows(input_name, input_resource)
    body = _body(name, rows, typed(sql))
    page = await previewed(request, admin, body, own_output=None)
    return await run_in_threadpool(
        _page, request, admin, name=name, rows=rows, sql=body["sql"], **page
    )


@router.post(NEW)
def create(
    request: Request,
    admin: AdminUser,
    name: FormText = "",
    input_name: FormList | None = None,
    input_resource: FormList | None = None,
    sql: FormText = "",
) -> Response:
    rows = _rows(input_name, input_resource)
    body = _body(name, rows, typed(sql))
    try:
        made = runtime_of(request).transformations.create(
            workspace_id=admin.workspace_id, body=body
        )
    except (DefinitionRejectedError, InvalidBodyError) as error:
        problems = view.problems_of(error.problems, body["sql"])
        return _page(
            request,
            admin,
            name=name,
            rows=rows,
            sql=body["sql"],
            problems=problems,
            status_code=400,
        )
    return see_other(f"/console/transformations/{made.id}?created=1")


def _rows(names: list[str] | None, resources: list[str] | None) -> list[tuple[str, str]]:
    """The filled input rows, as typed (a row with neither a name nor a resource is none)."""
    pairs = zip(names or [], resources or [], strict=False)
    return [(n.strip(), r.strip()) for n, r in pairs if n.strip() or r.strip()]


def _body(name: str, rows: list[tuple[str, str]], sql: str) -> dict[str, Any]:
    """The definition's body as the API takes it: a resource that is not a number is
    sent as it is, for the body's own check to name (`inputs.<name>`)."""
    inputs = {n: int(r) if r.isdigit() else r for n, r in rows}
    return {"name": name.strip(), "inputs": inputs, "sql": sql}


def _page(
    request: Request,
    admin: User,
    *,
    name: str,
    rows: list[tuple[str, str]],
    sql: str,
    preview: Any = None,
    problems: list[view.Problem] | None = None,
    status_code: int = 200,
) -> Response:
    problems = problems or []
    listed = runtime_of(request).listing.list_page(
        workspace_id=admin.workspace_id, limit=MAX_PAGE_SIZE
    )
    shown_rows = rows + [("", "")] * max(1, INPUT_ROWS - len(rows))
    return render(
        request,
        "transformation_new.html",
        user=admin,
        status_code=status_code,
        title="New transformation",
        name=name,
        rows=shown_rows,
        resources=[r for r in listed.resources if r.columns],
        more_resources=listed.next_after is not None,
        sql=sql,
        preview=preview,
        preview_rows=[view.cell_texts(row) for row in preview.rows] if preview else [],
        sql_problems=[p for p in problems if p.field == "sql"],
        name_problems=[p for p in problems if p.field == "name"],
        other_problems=[p for p in problems if p.field not in ("sql", "name")],
        numeric=view.NUMERIC,
    )
