"""The console's people for tests: users with a password set through their invite, and
signing in over HTTP as a browser on the console's own origin would."""

from __future__ import annotations

import itertools

import httpx

from tally.core.users import User
from tally.runtime import Runtime

PASSWORD = "correct horse battery staple"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
_numbers = itertools.count(1)


def make_user(runtime: Runtime, workspace_id: int, role: str, name: str | None = None) -> User:
    """A user of the workspace whose password is PASSWORD (names unique per run)."""
    issued = runtime.users.create_user(
        workspace_id=workspace_id, name=name or f"{role}-{next(_numbers)}", role=role
    )
    return runtime.users.accept_invite(issued.token, password=PASSWORD, confirmation=PASSWORD)


def sign_in(client: httpx.Client, name: str, password: str = PASSWORD) -> httpx.Response:
    """POST the sign-in form; the client keeps the session cookie it is given."""
    return client.post(
        "/console/sign-in",
        data={"username": name, "password": password},
        headers=SAME_ORIGIN,
    )
