"""`tally serve`: the API and, in the same process, a worker: the whole service."""

from __future__ import annotations

from typing import Annotated

import typer
import uvicorn

from tally.cli.demo import create_demo
from tally.cli.output import emit
from tally.runtime import build_runtime
from tally.settings import load_settings


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Create a demo workspace, key and sample source, and print a curl to try.",
        ),
    ] = False,
    workers: Annotated[
        int | None, typer.Option(help="API processes (env: TALLY_WEB_CONCURRENCY).")
    ] = None,
) -> None:
    """Run the service."""
    settings = load_settings()
    runtime = build_runtime(settings)  # applies migrations once, before any process starts
    if demo:
        made = create_demo(runtime.engine)
        url = f"http://{host}:{port}/api/v1/resources/{made.resource_id}/data"
        emit(
            {
                "workspace_id": made.workspace_id,
                "key": made.key,
                "resource_id": made.resource_id,
                "curl": f"curl -s -H 'X-API-Key: {made.key}' -H 'workspace_id: "
                f"{made.workspace_id}' '{url}?status=settled&ordering=-amount"
                f"&page_size=5'",
            }
        )
    runtime.close()
    typer.echo(f"tally {runtime.backend_name} listening on http://{host}:{port}", err=True)
    uvicorn.run(
        "tally.api.asgi:app_factory",
        factory=True,
        host=host,
        port=port,
        workers=workers or settings.web_concurrency,
        log_level="warning",
        access_log=False,
    )
