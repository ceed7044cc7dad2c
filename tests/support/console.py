"""The console's people for tests: users with a password set through their invite, and
signing in over HTTP as a browser on the console's own origin would."""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass

import httpx
from sqlalchemy import Engine

from tally.core.files import FileStatus
from tally.core.users import User
from tally.runtime import Runtime
from tally.storage import files
from tally.storage.engine import write_connection

PASSWORD = "correct horse battery staple"
SIGN_IN_MAX_FAILURES = 3  # the browser tests' servers lock a username after 3 failures
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
_numbers = itertools.count(1)


@dataclass(frozen=True)
class Site:
    """A running `tally serve` (its base URL) and a runtime on the same database."""

    url: str
    runtime: Runtime


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


def add_file(
    engine: Engine, source_id: int, *, at: dt.datetime, status: FileStatus, name: str
) -> int:
    """A file row of the source, received at `at` and finished with `status` five seconds
    later (what the overview shows of a source's files, without a download)."""
    values = files.new_file_values(
        resource_id=source_id,
        webhook_id=None,
        origin="upload",
        url_encrypted=None,
        url_redacted=None,
        filename=name,
        idempotency_key=None,
        blob_path=None,
        sha256=None,
        size=10,
        now=at,
        give_up_at=at + dt.timedelta(days=1),
    )
    with write_connection(engine) as conn, conn.begin():
        record, _ = files.insert_file(conn, values)
        error = "line 2, column amount: 'ten' is not a decimal" if status == "failed" else None
        files.finish(conn, record.id, status=status, now=at + dt.timedelta(seconds=5), error=error)
    return record.id
