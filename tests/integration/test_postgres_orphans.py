"""A killed test run leaves its throwaway PostgreSQL running; the next session's
`reap_orphans` stops and removes it, and only it: a cluster whose owner lives (this
process) and a folder that names no owner are left alone. Real clusters, in a folder
of the test's own (one the server's user may enter: pytest's tmp_path is not)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from support.pg import OWNER_FILE, PREFIX, reap_orphans, start_postgres


@pytest.fixture
def base() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="tally-reaper-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def accepts(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def test_a_cluster_whose_owner_is_gone_is_stopped_and_removed_and_no_other(base: Path) -> None:
    orphan = start_postgres(base)
    mine = start_postgres(base)
    try:
        (orphan.folder / OWNER_FILE).write_text(f"{dead_pid()} 1\n")
        unnamed = base / f"{PREFIX}being-made"
        unnamed.mkdir()
        assert accepts(orphan.url())

        assert reap_orphans(base) == [orphan.folder]

        assert not orphan.folder.exists()
        assert not accepts(orphan.url())
        assert accepts(mine.url())  # this process owns it: alive
        assert unnamed.exists()  # no owner named: nobody's provable orphan
        assert reap_orphans(base) == []
    finally:
        mine.stop()
        orphan.stop()


def test_a_pid_used_again_by_another_process_is_no_owner(base: Path) -> None:
    """The owner's pid runs, but as another process (its start time differs)."""
    folder = base / f"{PREFIX}reused"
    (folder / "data").mkdir(parents=True)
    (folder / OWNER_FILE).write_text(f"{os.getpid()} 0\n")  # this pid did not start at 0
    assert reap_orphans(base) == [folder]
    assert not folder.exists()


@pytest.mark.parametrize("text", ["", "not a pid", "12"])
def test_an_owner_file_that_names_no_process_is_left_alone(base: Path, text: str) -> None:
    folder = base / f"{PREFIX}odd"
    folder.mkdir()
    (folder / OWNER_FILE).write_text(text)
    assert reap_orphans(base) == []
    assert folder.exists()
