"""Sign-in, the invite page (a user chooses their password) and sign-out. One message
for every failed sign-in; the lock says the same whoever the username is."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from tally.console.auth import (
    clear_session_cookie,
    optional_user,
    runtime_of,
    session_id_of,
    set_session_cookie,
)
from tally.console.pages import render
from tally.core.errors import InviteNotValidError, PasswordRejectedError, SignInError
from tally.core.users import PASSWORD_MIN_CHARS

router = APIRouter(include_in_schema=False)
HOME = "/console/overview"
SIGN_IN = "/console/sign-in"


def see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


@router.get("/")
@router.get("/console")
@router.get("/console/")
def home(request: Request) -> Response:
    """Signed in: the workspace's overview; else the sign-in page."""
    return see_other(HOME if optional_user(request) else SIGN_IN)


@router.get(SIGN_IN)
def sign_in_page(request: Request, password_set: bool = False) -> Response:
    if optional_user(request) is not None:
        return see_other(HOME)
    notice = "Your password is set. Sign in with it." if password_set else None
    return render(request, "sign_in.html", title="Sign in", error=None, notice=notice, name="")


@router.post(SIGN_IN)
def sign_in(
    request: Request,
    username: Annotated[str, Form()] = "",
    password: Annotated[str, Form()] = "",
) -> Response:
    runtime = runtime_of(request)
    try:
        signed = runtime.sessions.sign_in(name=username, password=password)
    except SignInError as error:
        return render(
            request,
            "sign_in.html",
            status_code=401,
            title="Sign in",
            error=error.message,
            notice=None,
            name=username,
        )
    runtime.sessions.sign_out(session_id_of(request))  # a session already there ends
    response = see_other(HOME)
    set_session_cookie(request, response, signed.session_id)
    return response


@router.post("/console/sign-out")
def sign_out(request: Request) -> Response:
    runtime_of(request).sessions.sign_out(session_id_of(request))
    response = see_other(SIGN_IN)
    clear_session_cookie(request, response)
    return response


@router.get("/console/invite/{token}")
def invite_page(request: Request, token: str) -> Response:
    try:
        user = runtime_of(request).users.invited_user(token)
    except InviteNotValidError as error:
        return _invite_refused(request, error)
    return _invite_form(request, user.name, error=None)


@router.post("/console/invite/{token}")
def accept_invite(
    request: Request,
    token: str,
    password: Annotated[str, Form()] = "",
    confirmation: Annotated[str, Form()] = "",
) -> Response:
    users = runtime_of(request).users
    try:
        user = users.invited_user(token)
        users.accept_invite(token, password=password, confirmation=confirmation)
    except InviteNotValidError as error:
        return _invite_refused(request, error)
    except PasswordRejectedError as error:
        return _invite_form(request, user.name, error=error.message, status_code=400)
    runtime_of(request).sessions.sign_out(session_id_of(request))
    response = see_other(f"{SIGN_IN}?password_set=true")
    clear_session_cookie(request, response)
    return response


def _invite_form(
    request: Request, name: str, *, error: str | None, status_code: int = 200
) -> Response:
    return render(
        request,
        "invite.html",
        status_code=status_code,
        title="Choose your password",
        name=name,
        error=error,
        min_chars=PASSWORD_MIN_CHARS,
    )


def _invite_refused(request: Request, error: InviteNotValidError) -> Response:
    return render(
        request,
        "invite_refused.html",
        status_code=404,
        title="Invite not valid",
        error=error.message,
    )
