"""The workspace's overview (screen 1 of issue #33)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tally.console.auth import SignedIn
from tally.console.pages import render

router = APIRouter(include_in_schema=False)


@router.get("/console/overview")
def overview_page(request: Request, user: SignedIn) -> Response:
    return render(request, "overview.html", user=user, title="Overview")
