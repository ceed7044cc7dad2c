"""The transformation page (screen 4 of issue #33): its definition with its SQL in an
editor, "Preview" of the edited SQL (every role: viewers read every row already) through
the previews the API's `POST /api/v2/transformations/preview` uses, "Save" (admins,
checked here) through the service `PUT /api/v2/transformations/{id}` uses, its inputs
and readers, and its last runs.

The id is the transformation's, as in /api/v2/transformations/{id}; another workspace's,
or a reconciliation's, is the 404 page. A preview is a POST (SQL may be 100,000
characters, past what a URL carries), so it re-renders the page and is not bookmarkable;
a save answers 303 to the page with `?saved=1`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from tally.console import transformation_view as view
from tally.console.auth import AdminUser, SignedIn, runtime_of
from tally.console.pages import not_found_page, render
from tally.console.sign_in import see_other
from tally.core.derived_runs import DerivedRun
from tally.core.errors import (
    BusyError,
    ConflictError,
    DefinitionRejectedError,
    FieldProblem,
    InvalidBodyError,
    RunFailedError,
    TooManyPreviewsError,
    TransformationNotFoundError,
)
from tally.core.users import User
from tally.services.derived.graph import Neighbours
from tally.services.derived.history import RUNS_KEPT
from tally.services.derived.lifecycle import CHANGED_MEANWHILE
from tally.services.transformations.previews import Preview
from tally.services.transformations.service import Transformation

router = APIRouter(include_in_schema=False)
PAGE = "/console/transformations/{transformation_id}"
FormText = Annotated[str, Form()]
CHANGED_WARNING = (
    "The definition was changed since you opened this page (by another admin, or through "
    "the API). Your SQL is kept below: open the page in another tab to see theirs, or "
    "Save again to replace it."
)


@router.get(PAGE)
def transformation_page(
    request: Request,
    user: SignedIn,
    transformation_id: int,
    saved: bool = False,
    created: bool = False,
) -> Response:
    found = _found(request, user, transformation_id)
    if found is None:
        return not_found_page(request)
    notice = (
        "Created. Its first run is queued."
        if created
        else "Saved. A run with the new SQL is queued."
        if saved
        else None
    )
    sql = found.shown.definition["sql"]
    return _page(request, user, found, sql=sql, base=_base(found), notice=notice)


@router.post(PAGE + "/preview")
async def preview_sql(
    request: Request,
    user: SignedIn,
    transformation_id: int,
    sql: FormText = "",
    base: FormText = "",
) -> Response:
    """The edited SQL's columns and first rows, or its problems; nothing is kept. On the
    previews' own threads, never this loop's nor the requests' (issue #30)."""
    found = await run_in_threadpool(_found, request, user, transformation_id)
    if found is None:
        return await run_in_threadpool(not_found_page, request)
    shown, sql = found.shown, typed(sql)
    body = {**shown.definition, "sql": sql}
    page = await previewed(request, user, body, own_output=shown.resource_id)
    # `base`: still the definition the editing began from
    return await run_in_threadpool(_page, request, user, found, sql=sql, base=base, **page)


@router.post(PAGE)
def save_sql(
    request: Request,
    admin: AdminUser,
    transformation_id: int,
    sql: FormText = "",
    base: FormText = "",
) -> Response:
    """The definition with this SQL (name and inputs kept), run at once; its problems,
    each by the field it names, on the page again. A definition changed since the page
    was opened (`base`) is not overwritten: 409, the edited SQL kept, and a second Save
    replaces the definition now shown."""
    found = _found(request, admin, transformation_id)
    if found is None:
        return not_found_page(request)
    shown, sql = found.shown, typed(sql)
    try:
        if base != _base(found):
            raise ConflictError([FieldProblem(None, CHANGED_MEANWHILE)])
        runtime_of(request).transformations.replace(
            workspace_id=admin.workspace_id,
            derived_id=shown.id,
            body={**shown.definition, "sql": sql},
            expected=shown.definition,
        )
    except TransformationNotFoundError:  # deleted meanwhile
        return not_found_page(request)
    except (DefinitionRejectedError, InvalidBodyError) as error:
        problems = view.problems_of(error.problems, sql)
        return _page(request, admin, found, sql=sql, base=base, problems=problems, status_code=400)
    except ConflictError:
        now = _found(request, admin, transformation_id) or found
        problem = view.Problem(None, CHANGED_WARNING, None)
        return _page(
            request, admin, now, sql=sql, base=_base(now), problems=[problem], status_code=409
        )
    return see_other(f"/console/transformations/{shown.id}?saved=1")


async def previewed(
    request: Request, user: User, body: dict[str, Any], *, own_output: int | None
) -> dict[str, Any]:
    """A page's values after previewing `body`: the preview, or its problems and the
    page's status."""
    sql = body["sql"]
    try:
        submitted = runtime_of(request).previews.submit(
            workspace_id=user.workspace_id, body=body, own_output=own_output
        )
        return {"preview": await asyncio.wrap_future(submitted)}
    except (DefinitionRejectedError, InvalidBodyError) as error:
        return {"problems": view.problems_of(error.problems, sql), "status_code": 400}
    except RunFailedError as error:
        problems = view.problems_of([FieldProblem("sql", error.message)], sql)
        return {"problems": problems, "status_code": 400}
    except BusyError as error:  # TooManyPreviewsError too: one more is refused at once
        busy = 429 if isinstance(error, TooManyPreviewsError) else 503
        return {"problems": [view.Problem(None, error.message, None)], "status_code": busy}


@dataclass(frozen=True)
class Found:
    shown: Transformation
    graph: Neighbours
    runs: list[DerivedRun]  # newest first


def _found(request: Request, user: User, transformation_id: int) -> Found | None:
    """The transformation, its neighbours and its last runs, if of the user's workspace."""
    service = runtime_of(request).transformations
    try:
        shown, graph = service.get_with_neighbours(
            workspace_id=user.workspace_id, derived_id=transformation_id
        )
        runs = service.list_runs(workspace_id=user.workspace_id, derived_id=transformation_id)
    except TransformationNotFoundError:
        return None
    return Found(shown, graph, runs)


def _base(found: Found) -> str:
    return view.definition_digest(found.shown.definition)


def typed(sql: str) -> str:
    """The SQL as typed: a browser sends a textarea's line breaks as CRLF."""
    return sql.replace("\r\n", "\n")


def _page(
    request: Request,
    user: User,
    found: Found,
    *,
    sql: str,
    base: str,
    notice: str | None = None,
    preview: Preview | None = None,
    problems: list[view.Problem] | None = None,
    status_code: int = 200,
) -> Response:
    problems = problems or []
    shown, inputs = found.shown, found.shown.definition["inputs"]
    return render(
        request,
        "transformation.html",
        user=user,
        status_code=status_code,
        title=shown.name,
        transformation=shown,
        sql=sql,
        base=base,
        inputs=[(name, found.graph.inputs.get(r)) for name, r in inputs.items()],
        readers=found.graph.readers,
        runs=found.runs,
        notice=notice,
        preview=preview,
        preview_rows=[view.cell_texts(row) for row in preview.rows] if preview else [],
        sql_problems=[p for p in problems if p.field == "sql"],
        other_problems=[p for p in problems if p.field != "sql"],
        numeric=view.NUMERIC,
        page_of=view.page_of,
        runs_kept=RUNS_KEPT,
    )
