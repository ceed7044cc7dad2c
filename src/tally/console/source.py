"""A source's page (screen 3 of issue #33): its files newest first, its webhook and its
status-callback deliveries, each a page at a time from the services the API uses; one
file's page; and a file's status as JSON for the upload script's polling (no API key
lives in the browser: the session is its credential). Every state is in the URL:
`before` and `status` page and filter the files, `deliveries_before` pages the
deliveries."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from tally.console.auth import SignedIn, runtime_of
from tally.console.pages import not_found_page, render
from tally.core.errors import FileNotFoundInSourceError, ResourceNotFoundError
from tally.core.files import FileRecord, FileStatus
from tally.core.ids import WEBHOOK_ID_PREFIX
from tally.core.users import User

router = APIRouter(include_in_schema=False)
FILES_PAGE_SIZE = 50
DELIVERIES_PAGE_SIZE = 20
STATUS_CHOICES = tuple(status.value for status in FileStatus)
# The notification URL with its secret part left out (only the id's hash is kept).
WEBHOOK_PATTERN = f"POST /api/v2/webhooks/{WEBHOOK_ID_PREFIX}…/feed-source"


@dataclass(frozen=True)
class PageState:
    """What the page's URL holds: the files' page and filter, the deliveries' page."""

    source_id: int
    before: int | None = None
    status: str = ""
    deliveries_before: int | None = None

    def url(self, **changes: Any) -> str:
        """This state's URL, with `changes` (None and "" are left out)."""
        values = asdict(replace(self, **changes))
        path = f"/console/sources/{values.pop('source_id')}"
        query = urlencode(
            {name: value for name, value in values.items() if value not in (None, "")}
        )
        return path + (f"?{query}" if query else "")


@router.get("/console/sources/{source_id}")
def source_page(
    request: Request,
    user: SignedIn,
    source_id: int,
    before: Annotated[int | None, Query(ge=1)] = None,
    status: str = "",
    deliveries_before: Annotated[int | None, Query(ge=1)] = None,
    retried: int | None = None,
) -> Response:
    """Another workspace's source, or a resource that is not a source: the 404 page. An
    unknown `status` shows every file."""
    state = PageState(
        source_id, before, status if status in STATUS_CHOICES else "", deliveries_before
    )
    notice = f"Delivery {retried} is due now: the worker sends it next." if retried else None
    return source_view(request, user, state, notice=notice)


def source_view(
    request: Request,
    user: User,
    state: PageState,
    *,
    notice: str | None = None,
    action_error: str | None = None,
    upload_error: str | None = None,
    status_code: int = 200,
) -> Response:
    """The page in `state`; an action refused shows why (an upload's error beside its
    field)."""
    runtime, workspace_id, source_id = runtime_of(request), user.workspace_id, state.source_id
    try:
        source = runtime.listing.get(
            workspace_id=workspace_id, resource_id=source_id, kind="source"
        )
        found = runtime.files.list_recent_files(
            workspace_id=workspace_id,
            source_id=source_id,
            before_id=state.before,
            limit=FILES_PAGE_SIZE,
            statuses=(FileStatus(state.status),) if state.status else (),
        )
        deliveries = runtime.callback_deliveries.list_page(
            workspace_id=workspace_id,
            source_id=source_id,
            before_id=state.deliveries_before,
            limit=DELIVERIES_PAGE_SIZE,
        )
        webhook = runtime.webhooks.find_source_webhook(
            workspace_id=workspace_id, source_id=source_id
        )
    except ResourceNotFoundError:
        return not_found_page(request)
    return render(
        request,
        "source.html",
        user=user,
        status_code=status_code,
        title=source.name,
        source=source,
        state=state,
        files=found,
        more_files=len(found) == FILES_PAGE_SIZE,
        statuses=STATUS_CHOICES,
        deliveries=deliveries,
        more_deliveries=len(deliveries) == DELIVERIES_PAGE_SIZE,
        has_webhook=webhook is not None,
        webhook_pattern=WEBHOOK_PATTERN,
        notice=notice,
        action_error=action_error,
        upload_error=upload_error,
        max_file_bytes=runtime.uploads.max_file_bytes,
    )


@router.get("/console/sources/{source_id}/files/{file_id}")
def file_page(request: Request, user: SignedIn, source_id: int, file_id: int) -> Response:
    """One file: everything about it, its failed attempts, and the status callbacks
    sent about it."""
    runtime = runtime_of(request)
    try:
        source = runtime.listing.get(
            workspace_id=user.workspace_id, resource_id=source_id, kind="source"
        )
        record = runtime.files.get_source_file(
            workspace_id=user.workspace_id, source_id=source_id, file_id=file_id
        )
        deliveries = runtime.callback_deliveries.list_page(
            workspace_id=user.workspace_id,
            source_id=source_id,
            before_id=None,
            limit=DELIVERIES_PAGE_SIZE,
            file_id=file_id,
        )
        attempts = runtime.files.list_file_attempts(
            workspace_id=user.workspace_id, source_id=source_id, file_id=file_id
        )
    except (ResourceNotFoundError, FileNotFoundInSourceError):
        return not_found_page(request)
    return render(
        request,
        "source_file.html",
        user=user,
        title=f"File {record.id} of {source.name}",
        source=source,
        file=record,
        attempts=attempts,
        deliveries=deliveries,
    )


@router.get("/console/sources/{source_id}/files/{file_id}/status")
def file_status(request: Request, user: SignedIn, source_id: int, file_id: int) -> Response:
    """The file's status as JSON, polled by the upload script after an upload."""
    try:
        record = runtime_of(request).files.get_source_file(
            workspace_id=user.workspace_id, source_id=source_id, file_id=file_id
        )
    except (ResourceNotFoundError, FileNotFoundInSourceError):
        return JSONResponse({"error": "Not found"}, status_code=404)
    return JSONResponse(status_json(record))


def file_url(record: FileRecord) -> str:
    return f"/console/sources/{record.resource_id}/files/{record.id}"


def status_json(record: FileRecord) -> dict[str, object]:
    """What the upload script shows of a file: its status (final or not), rows, error."""
    return {
        "id": record.id,
        "status": record.status.value,
        "final": record.finished_at is not None,
        "rows": record.rows,
        "error": record.error,
        "url": file_url(record),
        "status_url": f"{file_url(record)}/status",
    }
