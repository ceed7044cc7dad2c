"""`tally admin ...`: accounts, workspaces, keys, local loads and reconciliations (the
onboarding contract)."""

from __future__ import annotations

import getpass
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from tally.cli.output import emit, reported_errors
from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import FieldProblem, InvalidBodyError, LoadError
from tally.core.reconciliation import SideName
from tally.core.users import ROLE_NAMES, IssuedInvite, User
from tally.processes.collector import settle_garbage_collector

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from tally.runtime import Runtime
    from tally.services.admin import KeyInfo
    from tally.services.loader.load import ProgressCallback

app = typer.Typer(
    help="Onboarding: accounts, workspaces, API keys, console users, local loads, "
    "reconciliations, transformations.",
    no_args_is_help=True,
)

# Who a change made by `tally admin` is recorded as having made it: the operator of the
# machine, who holds the database itself.
CLI_ACTOR = "tally admin"
# Files smaller than this load without a progress bar.
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


@contextmanager
def _runtime() -> Iterator[Runtime]:
    """The services on the database TALLY_HOME / TALLY_DATABASE_URL name, closed when the
    command ends; an expected failure inside is printed as the command's JSON error
    (exit 1)."""
    # Imported here: `tally --help` and a command line typer refuses need neither the
    # settings (pydantic) nor the database (SQLAlchemy), most of a start-up (issue #36).
    from tally.runtime import build_runtime
    from tally.settings import load_settings

    runtime = build_runtime(load_settings())
    try:
        with reported_errors():
            yield runtime
    finally:
        runtime.close()


@app.command("create-account")
def create_account(
    name: Annotated[str, typer.Option(help="Account name.")],
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(help="Origin allowed to call the ingestion API from a browser (repeatable)."),
    ] = None,
) -> None:
    """Create an account: the owner of workspaces, and of the browser origins that may
    call the ingestion API."""
    with _runtime() as runtime:
        account = runtime.admin.create_account(
            name=name, allowed_origins=list(allowed_origin or [])
        )
    emit({"id": account.id, "name": account.name})


@app.command("create-workspace")
def create_workspace(
    account: Annotated[int, typer.Option(help="Account id.")],
    name: Annotated[str, typer.Option(help="Workspace name.")],
    ingestion: Annotated[bool, typer.Option("--ingestion", help="Enable ingestion now.")] = False,
) -> None:
    """Create a workspace in an account: it holds sources and API keys."""
    with _runtime() as runtime:
        ws = runtime.admin.create_workspace(
            account_id=account, name=name, ingestion_enabled=ingestion
        )
    emit(
        {
            "id": ws.id,
            "account_id": ws.account_id,
            "name": ws.name,
            "ingestion_enabled": ws.ingestion_enabled,
        }
    )


@app.command("enable-ingestion")
def enable_ingestion(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """Let the workspace's API keys call the ingestion API (/api/v2)."""
    with _runtime() as runtime:
        ws = runtime.admin.enable_ingestion(workspace)
    emit({"id": ws.id, "ingestion_enabled": ws.ingestion_enabled})


@app.command("create-key")
def create_key(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """Create an API key. It is printed once and stored only as a hash."""
    with _runtime() as runtime:
        issued = runtime.admin.create_api_key(workspace)
    emit({"key": issued.key, "workspace_id": issued.workspace_id})


@app.command("list-keys")
def list_keys(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """The workspace's API keys: id, fingerprint, created and revoked times (never a key)."""
    with _runtime() as runtime:
        keys = runtime.admin.list_api_keys(workspace)
    emit({"workspace_id": workspace, "keys": [_key_json(key) for key in keys]})


@app.command("revoke-key")
def revoke_key(
    key_id: Annotated[
        int | None,
        typer.Option(
            "--id", help="Id of the key (see list-keys); else the key is read from stdin."
        ),
    ] = None,
) -> None:
    """Revoke an API key at once. The key itself is read from stdin (or a hidden prompt),
    never taken as an argument: arguments end up in shell history and process lists."""
    with _runtime() as runtime:
        if key_id is not None:
            revoked = runtime.admin.revoke_api_key(key_id=key_id)
        else:
            revoked = runtime.admin.revoke_api_key(key=_read_key())
    emit(_key_json(revoked))


def _read_key() -> str:
    if sys.stdin.isatty():
        return getpass.getpass("API key to revoke: ", stream=sys.stderr).strip()
    return sys.stdin.readline().strip()


def _key_json(key: KeyInfo) -> dict[str, object]:
    return {
        "id": key.id,
        "workspace_id": key.workspace_id,
        "fingerprint": key.fingerprint,
        "created_at": key.created_at.isoformat(),
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


@app.command("create-user")
def create_user(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    name: Annotated[str, typer.Option(help="Username (unique in the installation).")],
    role: Annotated[str, typer.Option(help=f"One of {', '.join(ROLE_NAMES)}.")],
) -> None:
    """Create a console user and print their invite URL (single use, valid 72 hours): it
    opens the page where they choose a password. Its host is TALLY_PUBLIC_URL."""
    with _runtime() as runtime:
        issued = runtime.users.create_user(workspace_id=workspace, name=name, role=role)
    emit({**_user_json(issued.user), **_invite_json(issued)})


@app.command("reset-user")
def reset_user(user_id: Annotated[int, typer.Option("--id", help="User id.")]) -> None:
    """A new invite URL for the user; their password, older invites and sessions stop
    working at once."""
    with _runtime() as runtime:
        issued = runtime.users.reset_user(user_id)
    emit({**_user_json(issued.user), **_invite_json(issued)})


@app.command("disable-user")
def disable_user(user_id: Annotated[int, typer.Option("--id", help="User id.")]) -> None:
    """Refuse the user's sign-ins from now on and end their sessions and invites."""
    with _runtime() as runtime:
        user = runtime.users.disable_user(user_id)
    emit(_user_json(user))


@app.command("list-users")
def list_users(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """The workspace's console users: id, name, role, whether disabled or still invited."""
    with _runtime() as runtime:
        found = runtime.users.list_users(workspace)
    emit({"workspace_id": workspace, "users": [_user_json(user) for user in found]})


def _user_json(user: User) -> dict[str, object]:
    return {
        "id": user.id,
        "name": user.name,
        "workspace_id": user.workspace_id,
        "role": user.role.value,
        "disabled": user.disabled,
        "has_password": user.has_password,
        "created_at": user.created_at.isoformat(),
    }


def _invite_json(issued: IssuedInvite) -> dict[str, object]:
    return {"invite_url": issued.url, "invite_expires_at": issued.expires_at.isoformat()}


@app.command("load")
def load(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    name: Annotated[str, typer.Option(help="Name of the new source.")],
    file: Annotated[Path, typer.Argument(help="CSV file.")],
    encoding: Annotated[
        str,
        typer.Option(
            help="Encoding of the file and of the source's later files (utf-8, latin-1, "
            "cp1252, utf-16, ...): read strictly, a byte not valid in it fails the load."
        ),
    ] = DEFAULT_ENCODING,
    columns: Annotated[
        Path | None,
        typer.Option(
            help="JSON file declaring the source's columns, as POST /api/v2/sources takes "
            "them (types, and formats: format, decimal_separator, thousands_separator, "
            "negative): a list of columns, or an object {columns, skip_leading_lines, "
            "skip_trailing_lines}. Without it the columns are inferred from the file."
        ),
    ] = None,
) -> None:
    """Create a source from a local CSV file (all or nothing); its rows are readable
    when this returns, and a worker (tally serve, tally worker) builds its indexes."""
    settle_garbage_collector()
    declared = None
    if columns is not None:
        declared = _definition_file(columns)
        if isinstance(declared, list):
            declared = {"columns": declared}
    with _runtime() as runtime, _progress(_readable_size(file)) as on_progress:
        result = runtime.catalogue.create_source_from_file(
            workspace_id=workspace,
            name=name,
            path=file,
            on_progress=on_progress,
            encoding=encoding,
            declared=declared,
        )
    shown: dict[str, Any] = {
        "id": result.resource.id,
        "name": result.resource.name,
        "rows": result.rows,
    }
    if result.warnings:
        shown["warnings"] = list(result.warnings)
    emit(shown)


@app.command("retract-file")
def retract_file(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    source: Annotated[int, typer.Option(help="Source id.")],
    file: Annotated[int, typer.Option("--file", help="File id (GET .../files lists them).")],
) -> None:
    """Take a delivered file back, as DELETE /api/v2/sources/{id}/files/{file_id} does:
    its rows removed in one transaction, the file `retracted` by `tally admin`, the
    derived resources reading the source run again, a `file.retracted` callback sent."""
    with _runtime() as runtime:
        record = runtime.files.retract(
            workspace_id=workspace, source_id=source, file_id=file, by=CLI_ACTOR
        )
    emit(
        {
            "id": record.id,
            "source_id": record.resource_id,
            "status": str(record.status),
            "rows": record.rows,
            "retracted_at": record.retracted_at.isoformat() if record.retracted_at else None,
            "retracted_by": record.retracted_by,
        }
    )


@app.command("run-reconciliation")
def run_reconciliation(
    reconciliation: Annotated[int, typer.Option("--id", help="Reconciliation id.")],
) -> None:
    """Run a reconciliation now, in this process; returns once its output is readable
    and prints its last run (a run another worker holds is waited for). Kept in its
    history as a run asked for by `tally admin`."""
    settle_garbage_collector()
    with _runtime() as runtime:
        runtime.reconciliations.record_operators_run(
            reconciliation_id=reconciliation, actor=CLI_ACTOR
        )
        record = runtime.derived.run_now(
            reconciliation,
            kind="reconciliation",
            worker=f"cli:{socket.gethostname()}:{os.getpid()}",
        )
    emit(record.last_run or {})


@app.command("create-reconciliation")
def create_reconciliation(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    file: Annotated[
        Path, typer.Option(help="The definition, a JSON file (as POST /api/v2/reconciliations).")
    ],
) -> None:
    """Define a reconciliation of two resources of the workspace; its first run is queued
    at once (a worker runs it: tally serve, tally worker)."""
    with _runtime() as runtime:
        created = runtime.reconciliations.create(
            workspace_id=workspace, body=_definition_file(file)
        )
    emit({"id": created.id, "name": created.name, "resource_id": created.resource_id})


@app.command("list-reconciliations")
def list_reconciliations(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """The workspace's reconciliations: definition, state and last run of each."""
    with _runtime() as runtime:
        found = runtime.reconciliations.list_defined(workspace_id=workspace)
    emit({"workspace_id": workspace, "reconciliations": [r.to_json() for r in found]})


@app.command("resolve-rows")
def resolve_rows(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    reconciliation: Annotated[int, typer.Option("--id", help="Reconciliation id.")],
    side: Annotated[SideName, typer.Option(help="The side whose rows are closed.")],
    row: Annotated[list[int], typer.Option(help="A position (`<side>._row`); repeatable.")],
    reason: Annotated[str, typer.Option(help="A code of the definition's resolution_reasons.")],
    note: Annotated[str | None, typer.Option(help="Why, for the audit.")] = None,
) -> None:
    """Close unmatched rows of one side that have no counterpart (a bank fee), as POST
    /api/v2/reconciliations/{id}/resolutions does; recorded as taken by `tally admin`."""
    with _runtime() as runtime:
        resolution = runtime.reconciliations.resolve(
            workspace_id=workspace,
            reconciliation_id=reconciliation,
            side=side,
            rows=row,
            reason=reason,
            note=note,
            actor=CLI_ACTOR,
        )
    emit(resolution.resolution_json())


@app.command("undo-resolution")
def undo_resolution(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    reconciliation: Annotated[int, typer.Option("--id", help="Reconciliation id.")],
    resolution: Annotated[int, typer.Option(help="Resolution id.")],
    note: Annotated[str | None, typer.Option(help="Why, for the audit.")] = None,
) -> None:
    """Undo a resolution: its rows are unmatched again (the resolution is kept, undone)."""
    with _runtime() as runtime:
        undone = runtime.reconciliations.reopen(
            workspace_id=workspace,
            reconciliation_id=reconciliation,
            resolution_id=resolution,
            note=note,
            actor=CLI_ACTOR,
        )
    emit(undone.resolution_json())


@app.command("create-transformation")
def create_transformation(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    file: Annotated[
        Path, typer.Option(help="The definition, a JSON file (as POST /api/v2/transformations).")
    ],
) -> None:
    """Define a transformation (one SELECT over resources of the workspace); its first
    run is queued at once (a worker runs it: tally serve, tally worker)."""
    with _runtime() as runtime:
        created = runtime.transformations.create(
            workspace_id=workspace, body=_definition_file(file)
        )
    shown = created.to_json()
    emit({k: shown[k] for k in ("id", "name", "resource_id", "columns")})


@app.command("run-transformation")
def run_transformation(
    transformation: Annotated[int, typer.Option("--id", help="Transformation id.")],
) -> None:
    """Run a transformation now, in this process; returns once its output is readable
    and prints its last run (a run another worker holds is waited for)."""
    settle_garbage_collector()
    with _runtime() as runtime:
        record = runtime.derived.run_now(
            transformation,
            kind="transformation",
            worker=f"cli:{socket.gethostname()}:{os.getpid()}",
        )
    emit(record.last_run or {})


@app.command("list-transformations")
def list_transformations(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """The workspace's transformations: definition, columns, state and last run of each."""
    with _runtime() as runtime:
        found = runtime.transformations.list_defined(workspace_id=workspace)
    emit({"workspace_id": workspace, "transformations": [t.to_json() for t in found]})


def _definition_file(file: Path) -> Any:
    """The file's JSON; one that cannot be read or parsed is the same error as such a
    body sent to the API (InvalidBodyError), in the command's JSON."""
    try:
        return orjson.loads(file.read_bytes())
    except OSError as error:
        problem = f"cannot read {str(file)!r}: {error.strerror or error}"
    except orjson.JSONDecodeError as error:
        problem = f"{str(file)!r} is not valid JSON: {error}"
    raise InvalidBodyError([FieldProblem(None, problem)])


def _readable_size(file: Path) -> int:
    """The file's size; a missing or unreadable file is a load error naming it, in the
    command's JSON like every other failure (not a usage message)."""
    try:
        with file.open("rb"):
            return file.stat().st_size
    except OSError as error:
        raise LoadError(f"cannot read {str(file)!r}: {error.strerror or error}") from None


class _progress:  # noqa: N801 - used as a context manager, reads like one
    """A rich progress bar on stderr for large files; nothing for small ones, nor when
    stderr is no terminal (a log file got one line feed from the transient bar, and the
    load paid rich's import and its refresh thread: issue #36)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressCallback | None:
        if self._size < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
            return None
        # Imported here, for the large files alone: rich's progress bar is ~0.05 s of
        # every other command's start-up (issue #36).
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            transient=True,
            console=Console(stderr=True),
        )
        self._bar.start()
        return self._update

    def _update(self, phase: str, done: int) -> None:
        assert self._bar is not None
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(phase, total=self._size)
        self._bar.update(self._tasks[phase], completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
