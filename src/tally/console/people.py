"""The admins' users page: the workspace's users, each disabled or given a new invite
with a POST that only an admin's session may make (checked here, not by hiding)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from tally.console.auth import AdminUser, runtime_of
from tally.console.pages import not_found_page, render
from tally.core.errors import UserNotFoundError
from tally.core.users import User

router = APIRouter(include_in_schema=False)


@router.get("/console/users")
def users_page(request: Request, admin: AdminUser) -> Response:
    return _page(request, admin, notice=None, invite_url=None)


@router.post("/console/users/{user_id}/disable")
def disable_user(request: Request, user_id: int, admin: AdminUser) -> Response:
    users = runtime_of(request).users
    target = _of_workspace(request, user_id, admin)
    if target is None:
        return not_found_page(request)
    if target.id == admin.id:  # the last admin would lock the workspace out
        return _refused_for_self(request, admin, "disable")
    users.disable_user(target.id)
    return _page(request, admin, notice=f"{target.name} is disabled.", invite_url=None)


@router.post("/console/users/{user_id}/reset")
def reset_user(request: Request, user_id: int, admin: AdminUser) -> Response:
    target = _of_workspace(request, user_id, admin)
    if target is None:
        return not_found_page(request)
    if target.id == admin.id:  # it would end this session and clear this password
        return _refused_for_self(request, admin, "give a new invite to")
    issued = runtime_of(request).users.reset_user(target.id)
    notice = f"A new invite for {target.name}; send them this link (valid 72 hours, once):"
    return _page(request, admin, notice=notice, invite_url=issued.url)


def _of_workspace(request: Request, user_id: int, admin: User) -> User | None:
    """The user, if of the admin's workspace: another's is the same as a missing one."""
    try:
        found = runtime_of(request).users.get_user(user_id)
    except UserNotFoundError:
        return None
    return found if found.workspace_id == admin.workspace_id else None


def _refused_for_self(request: Request, admin: User, verb: str) -> Response:
    notice = f"You cannot {verb} yourself: ask another admin, or use tally admin."
    return _page(request, admin, notice=notice, invite_url=None, status_code=400)


def _page(
    request: Request,
    admin: User,
    *,
    notice: str | None,
    invite_url: str | None,
    status_code: int = 200,
) -> Response:
    found = runtime_of(request).users.list_users(admin.workspace_id)
    return render(
        request,
        "users.html",
        user=admin,
        status_code=status_code,
        title="Users",
        users=found,
        notice=notice,
        invite_url=invite_url,
    )
