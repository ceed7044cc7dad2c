"""`tally serve` starting (issue #30, point 9), on both backends: it says `listening on
...` only once that address answers, with one API process or several, and a port another
process holds fails at once, before any start-up work, as one JSON error and exit 1."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from support.databases import make_settings
from support.processes import Processes, TallyProcess, process_defaults, process_env
from support.servers import LOOPBACK
from tally.cli.serve import _say_when_answering
from tally.settings import Settings


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(request, backend, tmp_path / "home", **process_defaults())


@pytest.mark.parametrize("api_processes", [1, 2])
def test_listening_is_said_once_the_address_answers(
    settings: Settings, processes: Processes, api_processes: int
) -> None:
    # Query processes as in production: starting them is most of the start-up's time.
    serve = processes.serve(settings, web_concurrency=api_processes, query_processes=None)
    serve.wait_for_stderr("listening on")
    said = re.search(r"listening on (\S+)", serve.stderr_text())
    assert said is not None
    assert said.group(1) == serve.url
    # one try, at once: no waiting for a server that only said it listens
    assert httpx.get(f"{said.group(1)}/health", timeout=30).json() == {"status": "ok"}
    assert serve.stderr_text().count("listening on") == 1
    assert serve.terminate(timeout=30) == 0


def test_a_taken_port_fails_at_once_as_a_json_error(settings: Settings, tmp_path: Path) -> None:
    home = tmp_path / "untouched"
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "tally", "serve", "--host", LOOPBACK, "--port", str(port)],
            env=process_env(settings, home=home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout) == {
        "error": f"cannot listen on http://{LOOPBACK}:{port}: Address already in use",
        "kind": "ListenError",
    }
    assert "listening" not in done.stderr
    assert not home.exists()  # nothing was started: no database, no migrations


def test_a_server_that_stops_before_answering_is_never_said_to_listen(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stopped = threading.Event()
    stopped.set()
    with socket.socket() as bound:
        bound.bind((LOOPBACK, 0))
        _say_when_answering(bound, "listening on ...", stopped)
    assert capsys.readouterr().err == ""


def test_an_ipv6_address_and_a_chosen_port_are_said_as_bound(
    settings: Settings, processes: Processes, tmp_path: Path
) -> None:
    """`--port 0`: the port the system chose is the one said, `[::1]` in brackets."""
    serve = TallyProcess(
        "serve", ["--host", "::1", "--port", "0"], process_env(settings), tmp_path / "logs"
    )
    processes.started.append(serve)
    serve.wait_for_stderr("listening on")
    said = re.search(r"listening on (http://\[::1\]:[0-9]+)", serve.stderr_text())
    assert said is not None, serve.describe()
    assert httpx.get(f"{said.group(1)}/health", timeout=30).json() == {"status": "ok"}
