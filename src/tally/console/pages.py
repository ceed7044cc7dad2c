"""The console's pages: one Jinja2 environment, autoescaped (every value a file can
carry is text on a page, never markup), and `render`, which every page goes through."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from tally.console.auth import optional_user
from tally.core.users import Role, User

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

environment = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=True,  # every template, whatever its name
    undefined=StrictUndefined,  # a misspelt name fails the test that renders it
    trim_blocks=True,
    lstrip_blocks=True,
)


def _when(moment: dt.datetime | None) -> str:
    """A time as a page shows it: UTC, to the minute (the `datetime` attribute is exact)."""
    return "" if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _count(number: int | None) -> str:
    """A count with thousands separators: 1,234,567 (never an amount: those stay exact)."""
    return "" if number is None else f"{number:,}"


environment.filters["when"] = _when
environment.filters["count"] = _count


def render(
    request: Request,
    template: str,
    *,
    user: User | None = None,
    status_code: int = 200,
    **values: Any,
) -> HTMLResponse:
    """The page; signed-in pages get the user (their name, role and the Sign out form)."""
    html = environment.get_template(template).render(
        user=user,
        is_admin=user is not None and user.role.allows(Role.ADMIN),
        workspace_name=getattr(request.state, "workspace_name", None),
        path=request.url.path,
        **values,
    )
    return HTMLResponse(html, status_code=status_code)


def not_found_page(request: Request) -> HTMLResponse:
    """The one answer for a page that is not there and for a page of another workspace."""
    return render(
        request, "not_found.html", user=optional_user(request), status_code=404, title="Not found"
    )
