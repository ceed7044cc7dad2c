"""`tally admin ...`: accounts, workspaces, keys and local loads (the onboarding contract)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from tally.cli.output import emit, reported_errors
from tally.core.collector import settle_garbage_collector
from tally.runtime import build_runtime
from tally.services import admin, catalogue
from tally.services.loader.load import ProgressCallback
from tally.settings import load_settings

app = typer.Typer(
    help="Onboarding: accounts, workspaces, API keys, local loads.", no_args_is_help=True
)

# Files smaller than this load without a progress bar.
PROGRESS_MIN_BYTES = 8 * 1024 * 1024


@app.command("create-account")
def create_account(
    name: Annotated[str, typer.Option(help="Account name.")],
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(help="Origin allowed to call the ingestion API from a browser (repeatable)."),
    ] = None,
) -> None:
    runtime = build_runtime(load_settings())
    with reported_errors():
        account = admin.create_account(
            runtime.engine, name=name, allowed_origins=list(allowed_origin or [])
        )
    emit({"id": account.id, "name": account.name})


@app.command("create-workspace")
def create_workspace(
    account: Annotated[int, typer.Option(help="Account id.")],
    name: Annotated[str, typer.Option(help="Workspace name.")],
    ingestion: Annotated[bool, typer.Option("--ingestion", help="Enable ingestion now.")] = False,
) -> None:
    runtime = build_runtime(load_settings())
    with reported_errors():
        ws = admin.create_workspace(
            runtime.engine, account_id=account, name=name, ingestion_enabled=ingestion
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
    runtime = build_runtime(load_settings())
    with reported_errors():
        ws = admin.enable_ingestion(runtime.engine, workspace)
    emit({"id": ws.id, "ingestion_enabled": ws.ingestion_enabled})


@app.command("create-key")
def create_key(workspace: Annotated[int, typer.Option(help="Workspace id.")]) -> None:
    """Create an API key. It is printed once and stored only as a hash."""
    runtime = build_runtime(load_settings())
    with reported_errors():
        issued = admin.create_api_key(runtime.engine, workspace)
    emit({"key": issued.key, "workspace_id": issued.workspace_id})


@app.command("load")
def load(
    workspace: Annotated[int, typer.Option(help="Workspace id.")],
    name: Annotated[str, typer.Option(help="Name of the new source.")],
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="CSV file.")],
) -> None:
    """Create a source from a local CSV file (all or nothing)."""
    runtime = build_runtime(load_settings())
    settle_garbage_collector()
    size = file.stat().st_size
    with reported_errors(), _progress(size) as on_progress:
        result = catalogue.create_source_from_file(
            runtime.engine, workspace_id=workspace, name=name, path=file, on_progress=on_progress
        )
    emit({"id": result.resource.id, "name": result.resource.name, "rows": result.rows})


class _progress:  # noqa: N801 - used as a context manager, reads like one
    """A rich progress bar on stderr for large files; nothing for small ones."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._bar: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> ProgressCallback | None:
        if self._size < PROGRESS_MIN_BYTES:
            return None
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
