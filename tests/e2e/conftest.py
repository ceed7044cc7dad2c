"""The end-to-end tests' `tally` subprocesses: each test's own, all stopped at the end,
their logs under the test's tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.processes import Processes, running_processes


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    with running_processes(tmp_path / "logs") as started:
        yield started
