"""`tally admin load`'s scratch (SQLite): its lock file tells a running load from a
killed one, so the sweep (`staging.leftovers`) finds exactly what killed loads left.
tests/e2e/test_staging_leftovers.py runs the same through real `tally` processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from tally.storage import staging
from tally.storage.staging import Leftover


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'main.db'}")
    yield engine
    engine.dispose()


def swept(engine: Engine, folder: Path) -> list[Leftover]:
    with engine.connect() as conn:
        return staging.leftovers(conn, folder)


def create_table(engine: Engine, name: str) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {name} (x INTEGER)")


def test_a_running_load_is_left_alone_and_cleans_up_after_itself(
    engine: Engine, tmp_path: Path
) -> None:
    folder = tmp_path / "staging"
    with staging.command_load(folder) as scratch:
        scratch.path.write_bytes(b"rows")
        create_table(engine, scratch.table)
        key = scratch.table.removeprefix("staged_")
        assert sorted(p.name for p in folder.iterdir()) == [f"load-{key}.db", f"load-{key}.lock"]
        assert swept(engine, folder) == []
    assert list(folder.iterdir()) == []  # the caller drops its table


def test_a_killed_load_leaves_its_file_table_and_lock_file_to_the_sweep(
    engine: Engine, tmp_path: Path
) -> None:
    """A process killed inside `command_load` (SIGKILL: nothing of ours runs after)."""
    folder = tmp_path / "staging"
    script = textwrap.dedent(
        f"""
        import sys, time, sqlalchemy as sa
        from pathlib import Path
        from tally.storage import staging
        engine = sa.create_engine({str(engine.url)!r})
        with staging.command_load(Path({str(folder)!r})) as scratch:
            scratch.path.write_bytes(b"rows")
            with engine.begin() as conn:
                conn.exec_driver_sql(f"CREATE TABLE {{scratch.table}} (x INTEGER)")
            print(scratch.table, flush=True)
            time.sleep(60)
        """
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None
            table = child.stdout.readline().strip()
            assert swept(engine, folder) == []  # alive: nothing to sweep
        finally:
            child.kill()
            child.wait(10)
    key = table.removeprefix("staged_")
    assert swept(engine, folder) == [
        Leftover(None, str(folder / f"load-{key}.db"), is_table=False),
        Leftover(None, table, is_table=True),
        Leftover(None, str(folder / f"load-{key}.lock"), is_table=False),  # last
    ]
    for leftover in swept(engine, folder):
        staging.remove(engine, leftover)
    assert list(folder.iterdir()) == []
    assert table not in sa.inspect(engine).get_table_names()


def test_a_staging_file_or_table_without_its_lock_file_is_a_dead_loads(
    engine: Engine, tmp_path: Path
) -> None:
    """The lock file comes first and goes last: without it, its load has ended."""
    folder = tmp_path / "staging"
    folder.mkdir()
    key, other = uuid.uuid4().hex, uuid.uuid4().hex
    (folder / f"load-{key}.db").write_bytes(b"rows")
    create_table(engine, f"staged_{other}")
    create_table(engine, staging.STAGED_TABLE)  # a staging file's own table: not a load's
    (folder / "load-not-a-key.db").write_bytes(b"")  # not named as a load's
    assert swept(engine, folder) == [
        Leftover(None, str(folder / f"load-{key}.db"), is_table=False),
        Leftover(None, f"staged_{other}", is_table=True),
    ]


def test_a_pending_lock_file_is_a_dead_loads_only_once_it_is_old(
    engine: Engine, tmp_path: Path
) -> None:
    """A load creates its lock file under a pending name, locks it, then renames it: a
    young unlocked pending file may be a load between the two."""
    folder = tmp_path / "staging"
    folder.mkdir()
    key = uuid.uuid4().hex
    pending = folder / f".load-{key}.lock"
    pending.write_bytes(b"")
    (folder / f"load-{key}.db").write_bytes(b"rows")
    assert swept(engine, folder) == []
    old = time.time() - staging.PENDING_LOCK_SECONDS - 1
    os.utime(pending, (old, old))
    assert swept(engine, folder) == [
        Leftover(None, str(folder / f"load-{key}.db"), is_table=False),
        Leftover(None, str(pending), is_table=False),
    ]
