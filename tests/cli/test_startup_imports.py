"""What a command of `tally admin` imports (issue #36), on both backends: none of the web
stack, the worker or the libraries of services it does not call. Importing them all was
most of every command's 1.3 s start-up, inside the benchmark's timed load. Read from the
real command's process as it exits, never timed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.cli import cli_env
from tally.settings import Settings

COMMAND_TIMEOUT_SECONDS = 120
# `python -m tally ARGS`, writing the names of the modules it imported to MODULES_FILE at exit.
WITH_MODULES_LISTED = """
import atexit, json, os, runpy, sys
def listed():
    with open(os.environ["MODULES_FILE"], "w") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(listed)
sys.argv[0] = "tally"
runpy.run_module("tally", run_name="__main__", alter_sys=True)
"""
# What `tally serve` alone needs: the HTTP app, its server, its console, the worker.
SERVE_ONLY = ("fastapi", "starlette", "uvicorn", "jinja2", "tally.api", "tally.console")
SERVE_ONLY += ("tally.worker",)
# Libraries of services no onboarding command calls: transformations' SQL parser, the
# column snapshots' and reconciliations' arrays, downloads, console passwords, signing.
UNCALLED = ("sqlglot", "numpy", "httpx", "argon2", "standardwebhooks")
LARGE_LOADS_ONLY = ("rich",)  # the progress bar (typer's --help draws with it too)


def run(env: dict[str, str], tmp_path: Path, *args: str) -> tuple[dict[str, Any], set[str]]:
    """`tally ARGS` in `env`: the one JSON object it printed (None for --help), and
    every module it imported."""
    listing = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", WITH_MODULES_LISTED, *args],
        env={**env, "MODULES_FILE": str(listing)},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = json.loads(done.stdout) if args[-1] != "--help" else {}
    return printed, set(json.loads(listing.read_text()))


def imported(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    within = tuple(f"{package}." for package in packages)
    return sorted(m for m in modules if m in packages or m.startswith(within))


def test_onboarding_commands_import_neither_the_web_stack_nor_uncalled_services(
    settings: Settings, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    env.update(cli_env(settings))
    csv = tmp_path / "payments.csv"
    csv.write_text("id,amount,booked_on\n1,10.50,2024-01-31\n2,-3.25,2024-02-01\n")
    account, first = run(env, tmp_path, "admin", "create-account", "--name", "Acme")
    created = ["create-workspace", "--account", str(account["id"]), "--name", "Ops"]
    workspace, second = run(env, tmp_path, "admin", *created)
    ws = str(workspace["id"])
    _, third = run(env, tmp_path, "admin", "create-key", "--workspace", ws)
    loading = ["load", "--workspace", ws, "--name", "payments", str(csv)]
    loaded, fourth = run(env, tmp_path, "admin", *loading)
    assert loaded["rows"] == 2
    unused = SERVE_ONLY + UNCALLED + LARGE_LOADS_ONLY
    if settings.database_url is None:
        unused += ("psycopg",)  # SQLite's commands need no PostgreSQL driver
    for modules in (first, second, third, fourth):
        assert "tally.runtime" in modules  # the listing is the command's own
        assert imported(modules, unused) == []


def test_help_imports_no_service(tmp_path: Path) -> None:
    env = {**os.environ, "TALLY_HOME": str(tmp_path / "home")}
    _, modules = run(env, tmp_path, "--help")
    assert "tally.cli.admin" in modules
    assert imported(modules, ("tally.services", *SERVE_ONLY, *UNCALLED)) == []
