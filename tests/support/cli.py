"""The `tally` command run in-process, as the CLI tests read it: an exit code and the one
JSON object it printed (every command prints exactly one)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from tally.cli.main import app
from tally.settings import Settings


def cli_env(settings: Settings) -> dict[str, str]:
    """The environment that points the command at these settings' home and database."""
    env = {"TALLY_HOME": str(settings.home), "TALLY_LOG_LEVEL": "WARNING"}
    if settings.database_url:
        env["TALLY_DATABASE_URL"] = settings.database_url
    return env


def tally(settings: Settings, *args: str, stdin: str | None = None) -> tuple[int, dict[str, Any]]:
    """Run one command in-process; its exit code and the one JSON object it printed."""
    result = CliRunner().invoke(app, list(args), env=cli_env(settings), input=stdin)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line, got {result.stdout!r}"
    return result.exit_code, json.loads(lines[0])


def admin(settings: Settings, *args: str) -> tuple[int, dict[str, Any]]:
    """`tally admin ...`: the operators' commands (reconciliations, transformations)."""
    return tally(settings, "admin", *args)
