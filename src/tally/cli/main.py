"""The `tally` command."""

from __future__ import annotations

from typing import Any

import typer
from typer._click.core import Context  # typer's own click (see output.py)
from typer.core import TyperGroup

from tally.cli import admin, serve, worker
from tally.cli.output import reported_usage_errors
from tally.processes.collector import freeze_at_exit


class _Commands(TyperGroup):
    """`tally`: a usage error, wherever click finds it (this group's options, a command's
    name, a command's options and arguments), is reported as JSON."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: Context | None = None,
        **extra: Any,
    ) -> Context:
        with reported_usage_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Context) -> Any:
        with reported_usage_errors():
            return super().invoke(ctx)


app = typer.Typer(
    cls=_Commands,
    help="tally: a self-hosted data platform for finance operations.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(admin.app, name="admin")
app.command("serve")(serve.serve)
app.command("worker")(worker.worker)
freeze_at_exit()  # a `tally` process leaves its objects to the system as it exits
