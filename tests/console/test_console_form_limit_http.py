"""A console form's body is bounded (console/guard.py, FORM_MAX_BYTES): larger is a 413
page before it is read whole, whether it says its length or streams it; an upload is
bounded by TALLY_MAX_FILE_BYTES instead; a field the form parser refuses is a page too.
Over real HTTP, both backends."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from support.console import SAME_ORIGIN, make_user, sign_in
from support.factories import Tenant
from tally.console.guard import FORM_MAX_BYTES
from tally.runtime import Runtime

FORM = {**SAME_ORIGIN, "content-type": "application/x-www-form-urlencoded"}


def _streamed(size: int) -> Iterator[bytes]:
    """A body of `size` bytes with no Content-Length (chunked), in fields of 8 KiB (each
    well under the form parser's own limit per field)."""
    field = b"f=" + b"x" * 8190 + b"&"
    yield b"username=someone&password=x&"
    for _ in range(size // len(field)):
        yield field


def test_a_form_over_the_limit_is_a_413_before_it_is_read(api: httpx.Client) -> None:
    body = b"username=someone&password=" + b"x" * FORM_MAX_BYTES
    response = api.post("/console/sign-in", content=body, headers=FORM)
    assert response.status_code == 413
    assert "Too large" in response.text
    assert response.headers["content-security-policy"]  # the guard's headers, as every page's


def test_a_streamed_form_over_the_limit_is_a_413(api: httpx.Client) -> None:
    response = api.post("/console/sign-in", content=_streamed(FORM_MAX_BYTES * 2), headers=FORM)
    assert response.status_code == 413
    assert "Too large" in response.text


def test_a_form_within_the_limit_is_answered_as_usual(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    api.follow_redirects = False
    user = make_user(runtime, tenant.workspace_id, "admin")
    assert sign_in(api, user.name).status_code == 303  # a sign-in form, small
    fields = {"username": "nobody", "password": "y" * 1000}
    fields |= {f"extra{n}": "z" * 900_000 for n in range(3)}  # 2.7 MB, each field < 1 MiB
    refused = api.post("/console/sign-in", data=fields, headers=SAME_ORIGIN)
    assert refused.status_code == 401  # the sign-in page again, with its one message
    assert "Wrong username or password." in refused.text


def test_an_upload_larger_than_a_form_is_not_refused_as_one(
    api: httpx.Client, runtime: Runtime, tenant: Tenant
) -> None:
    api.follow_redirects = False
    user = make_user(runtime, tenant.workspace_id, "admin")
    sign_in(api, user.name)
    rows = b"".join(b"R-%08d,1.00\n" % n for n in range(FORM_MAX_BYTES // 12 + 1000))
    response = api.post(
        "/console/sources/999999/upload",  # no such source: the route answers, not the guard
        files={"file": ("big.csv", b"reference,amount\n" + rows, "text/csv")},
        headers=SAME_ORIGIN,
    )
    assert response.status_code == 404


def test_a_field_the_form_parser_refuses_is_a_page_saying_so(api: httpx.Client) -> None:
    body = b"username=someone&password=" + b"x" * (1024 * 1024 + 1)  # one field over 1 MiB
    response = api.post("/console/sign-in", content=body, headers=FORM)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")
    assert "The form could not be read" in response.text
    assert "exceeded maximum size" in response.text  # the parser's own reason
