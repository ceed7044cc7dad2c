"""The `tally` command."""

from __future__ import annotations

import typer

from tally.cli import admin, serve, worker

app = typer.Typer(
    help="tally: a self-hosted data platform for finance operations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(admin.app, name="admin")
app.command("serve")(serve.serve)
app.command("worker")(worker.worker)
