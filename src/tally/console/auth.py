"""Who is asking: the session cookie, the signed-in user behind it, and the role an
action needs. Roles are checked here, on the server, for every route that declares one:
a button hidden from a viewer is a courtesy, this is the rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request, Response

from tally.core.errors import SessionEndedError
from tally.core.users import Role, User
from tally.runtime import Runtime

# `__Host-`: a cookie only this exact origin may set or read, over https alone (a
# sibling subdomain cannot plant one); plain http (localhost) cannot carry the prefix.
SECURE_COOKIE = "__Host-tally_session"
PLAIN_COOKIE = "tally_session"


class SignInRequiredError(Exception):
    """No live session: the browser is sent to the sign-in page."""


class ForbiddenError(Exception):
    """The user's role does not allow the action: a 403 page."""


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def is_https(request: Request) -> bool:
    return runtime_of(request).settings.public_url.lower().startswith("https://")


def cookie_name(request: Request) -> str:
    return SECURE_COOKIE if is_https(request) else PLAIN_COOKIE


def session_id_of(request: Request) -> str | None:
    return request.cookies.get(cookie_name(request))


def set_session_cookie(request: Request, response: Response, session_id: str) -> None:
    """HttpOnly (no script reads it), SameSite=Lax (no other site's POST carries it),
    Secure when TALLY_PUBLIC_URL is https; no Max-Age: the server decides when it ends."""
    response.set_cookie(
        cookie_name(request),
        session_id,
        httponly=True,
        samesite="lax",
        secure=is_https(request),
        path="/",
    )


def clear_session_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(
        cookie_name(request), path="/", httponly=True, samesite="lax", secure=is_https(request)
    )


def optional_user(request: Request) -> User | None:
    """The signed-in user, or None (a page that also serves signed-out browsers)."""
    try:
        return signed_in(request)
    except SignInRequiredError:
        return None


def signed_in(request: Request) -> User:
    """The user of the request's live session; else SignInRequiredError."""
    runtime = runtime_of(request)
    try:
        user = runtime.sessions.user_of(session_id_of(request))
    except SessionEndedError:
        raise SignInRequiredError() from None
    request.state.workspace_name = runtime.admin.get_workspace(user.workspace_id).name
    return user


SignedIn = Annotated[User, Depends(signed_in)]


def needs(role: Role) -> Callable[[Request], User]:
    """A dependency: the signed-in user, if their role allows `role`'s actions."""

    def allowed(request: Request) -> User:
        user = signed_in(request)
        if not user.role.allows(role):
            raise ForbiddenError()
        return user

    return allowed


AdminUser = Annotated[User, Depends(needs(Role.ADMIN))]
