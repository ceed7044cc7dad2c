"""A command line the CLI cannot read (issue #30, point 10): like every failure, one JSON
object `{"error", "kind"}` on stdout and exit 1, as README's Operate section promises,
for every command, whether run as installed or in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tally.cli.main import app
from tally.cli.output import reported_usage_errors

TALLY = Path(sys.executable).with_name("tally")  # the installed script, as users run it

USAGE_ERRORS = {
    "missing option": (["admin", "create-key"], "Missing option '--workspace'"),
    "bad value": (["admin", "create-key", "--workspace", "x"], "'x' is not a valid int"),
    "unknown command": (["nosuch"], "No such command 'nosuch'"),
    "unknown subcommand": (["admin", "nosuch"], "No such command 'nosuch'"),
    "unknown option": (["worker", "--bogus"], "No such option: --bogus"),
    "unknown top-level option": (["--bogus", "serve"], "No such option: --bogus"),
    "extra argument": (["admin", "list-keys", "--workspace", "1", "more"], "unexpected extra"),
}


def commands(group: typer.core.TyperGroup, path: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """Every command's words, `tally` left out: `["admin", "create-key"]`, `["serve"]`."""
    for name, command in group.commands.items():
        if isinstance(command, typer.core.TyperGroup):
            yield from commands(command, (*path, name))
        else:
            yield [*path, name]


COMMANDS = list(commands(typer.main.get_group(app)))


@pytest.mark.parametrize(("words", "says"), USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_usage_error_is_one_json_object_and_exit_1(
    tmp_path: Path, words: list[str], says: str
) -> None:
    done = subprocess.run(
        [TALLY, *words],
        env={"TALLY_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    printed = json.loads(line)
    assert printed["kind"] == "UsageError"
    assert set(printed) == {"error", "kind"}
    assert says in printed["error"]
    assert "--help" in printed["error"]  # where to look next
    assert not (tmp_path / "home").exists()  # refused before anything was touched


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(w) for w in COMMANDS])
def test_every_command_reports_an_unknown_option_as_json(tmp_path: Path, words: list[str]) -> None:
    assert len(COMMANDS) > 10
    result = CliRunner().invoke(
        app,
        [*words, "--no-such-option"],
        env={"TALLY_HOME": str(tmp_path / "home")},
        prog_name="tally",
    )
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout) == {
        "error": f"No such option: --no-such-option. See 'tally {' '.join(words)} --help'.",
        "kind": "UsageError",
    }


def test_a_usage_error_without_a_command_is_reported_without_the_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A usage error raised by hand (no context) still becomes the JSON object."""
    with pytest.raises(typer.Exit) as stopped, reported_usage_errors():
        raise typer.BadParameter("a --workspace of 0")
    assert stopped.value.exit_code == 1
    assert json.loads(capsys.readouterr().out) == {
        "error": "Invalid value: a --workspace of 0.",
        "kind": "UsageError",
    }


def test_a_bare_tally_prints_its_help() -> None:
    result = CliRunner().invoke(app, [])
    assert "Usage:" in result.output
    assert "admin" in result.output
