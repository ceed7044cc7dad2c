"""SQLite: a load's rows staged in a database file of its own, then moved into the main
database in short transactions (decision 0013).

The staging file is scratch: no journal, no fsync, one per load attempt, deleted when
the attempt ends. A killed attempt leaves its staging file, and perhaps the table it was
filling; both are named after the file, and removed once the file has ended (or by the
sweep at a worker's start, `leftovers`). `tally admin load` has no file record to tell
a killed load from a running one: it holds a lock file instead (`command_load`). Writing it
takes no lock of the main database, so reading, checking and converting a file of any
size never makes another writer wait. The main database then receives the converted
rows, attached by ATTACH (outside a transaction, as SQLite requires), either in chunks
into a table nothing refers to yet (a source's first file, renamed into place when
published; converted on the way when staged as the file's text, `RAW_TABLE`) or in
one INSERT ... SELECT (a later file: rows appended to a live table would be seen
before they are published). Most first files skip the staging file: their rows are
written straight into that table (services/loader/staged.py), the same leftover if
killed.

A transformation's run stages its query's rows the same way (`derived_scratch_path`,
`attached(scratch=True)`: written by the run's own connection), and moves them in
chunks into its staged output (decision 0016).
"""

from __future__ import annotations

import fcntl
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.pool import NullPool

from tally.core.columns import Column
from tally.storage.engine import unsynced_commits, write_connection, yield_to_writers
from tally.storage.home import make_private_dir, prepare_sqlite_file
from tally.storage.resource_tables.ddl import ROW_ID, create_table, drop_table, with_file_id

STAGED_TABLE = "staged_rows"
RAW_TABLE = "raw_rows"  # a file's rows as its text, when converted as they leave
STAGE_ALIAS = "stage"
# Rows moved per transaction into a table not yet published: ~36 ms each for the
# benchmark's 10 columns with fsync (20,000 rows); writers waiting for the lock go
# between two (`yield_to_writers`).
CHUNK_ROWS = 20_000


def scratch_path(folder: Path, file_id: int) -> Path:
    """A new staging database's path in `folder` (private, as all of TALLY_HOME), named
    after the file it stages, one per attempt: a killed attempt's is told apart by its
    file's state, and removed once the file has ended."""
    return make_private_dir(folder) / f"file-{file_id}-{uuid.uuid4().hex}.db"


@dataclass(frozen=True)
class CommandLoad:
    """What one `tally admin load` stages into: its staging file and the table it fills
    in the main database, named by one key."""

    path: Path
    table: str


# A lock file not yet renamed into place is a killed load's once it is this old (younger,
# its load may be between creating and locking it).
PENDING_LOCK_SECONDS = 60.0


@contextmanager
def command_load(folder: Path) -> Iterator[CommandLoad]:
    """A `tally admin load`'s scratch names, alive while this holds an exclusive `flock`
    on `load-{key}.lock` (released by the kernel when the process dies, however it dies).
    The lock file is created and locked under a pending name, then renamed: it never
    exists unlocked while its load lives. It is removed last, after the staging file
    (and the caller drops its table inside), so a staging file or table without a lock
    file is a dead load's too (`leftovers`)."""
    folder = make_private_dir(folder)
    key = uuid.uuid4().hex
    pending, lock = folder / f".load-{key}.lock", folder / f"load-{key}.lock"
    descriptor = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        pending.rename(lock)
        path = folder / f"load-{key}.db"
        try:
            yield CommandLoad(path, f"staged_{key}")
        finally:
            path.unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
    finally:
        os.close(descriptor)


def derived_scratch_path(folder: Path, resource_id: int) -> Path:
    """A new staging database for one run of the derived output `resource_id`, after
    removing what earlier runs of it left: the caller holds the output's lease, so no
    other run of it is live, and a killed one's file is garbage."""
    for left in folder.glob(f"derived-{resource_id}-*.db") if folder.is_dir() else ():
        left.unlink(missing_ok=True)
    return make_private_dir(folder) / f"derived-{resource_id}-{uuid.uuid4().hex}.db"


def filled_table(table: str, file_id: int) -> str:
    """The table a placeholder's first file (`file_id`) fills before it is published
    as `table`: one per file, so a killed attempt's is replaced by the next."""
    return f"{table}_f{file_id}"


_FILE_STAGING = re.compile(r"file-(\d+)-[0-9a-f]+\.db")
_FILLED_TABLE = re.compile(r"r_\d+_f(\d+)")
_COMMAND_STAGING = re.compile(r"load-([0-9a-f]{32})\.db")
_COMMAND_TABLE = re.compile(r"staged_([0-9a-f]{32})")
_COMMAND_LOCK = re.compile(r"(\.?)load-([0-9a-f]{32})\.lock")


@dataclass(frozen=True)
class Leftover:
    """A staging file or an unpublished table an attempt at a file left behind
    (`file_id`), or a killed `tally admin load` (`file_id` None: known dead)."""

    file_id: int | None
    name: str  # the staging file's path, or the table's name
    is_table: bool


def leftovers(conn: Connection, folder: Path) -> list[Leftover]:
    """What loads left: of files, staging files in `folder` and tables of the main
    database filled and never published; of `tally admin load`s no longer running,
    their staging files, tables and lock files."""
    names = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    tables = inspect(conn).get_table_names()
    found = [
        Leftover(int(m[1]), str(path), is_table=False)
        for path in names
        if (m := _FILE_STAGING.fullmatch(path.name))
    ]
    found += [
        Leftover(int(m[1]), table, is_table=True)
        for table in tables
        if (m := _FILLED_TABLE.fullmatch(table))
    ]
    return found + _dead_command_loads(folder, names, tables)


def _dead_command_loads(
    folder: Path, names: Sequence[Path], tables: Sequence[str]
) -> list[Leftover]:
    """Killed `tally admin load`s' leftovers. The staging files and tables were listed
    before the lock files are: one whose lock file is gone by then belongs to a load
    that ended (its lock file existed before them, and goes after them)."""
    staged = {m[1]: path for path in names if (m := _COMMAND_STAGING.fullmatch(path.name))}
    filled = {m[1]: table for table in tables if (m := _COMMAND_TABLE.fullmatch(table))}
    locks = sorted(folder.glob("*load-*.lock")) if folder.is_dir() else []
    live: set[str] = set()
    dead: list[Leftover] = []
    for lock in locks:
        if not (m := _COMMAND_LOCK.fullmatch(lock.name)):
            continue
        if _held(lock) or (m[1] and time.time() - _mtime(lock) < PENDING_LOCK_SECONDS):
            live.add(m[2])
        else:
            dead.append(Leftover(None, str(lock), is_table=False))
    # The lock files last: a sweep cut short leaves what it has not removed findable.
    return [
        *(Leftover(None, str(path), is_table=False) for k, path in staged.items() if k not in live),
        *(Leftover(None, table, is_table=True) for k, table in filled.items() if k not in live),
        *dead,
    ]


def _held(lock: Path) -> bool:
    """Whether a live process holds `lock` (a file gone meanwhile: its load ended)."""
    try:
        descriptor = os.open(lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)  # releases the lock if taken
    return False


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def leftovers_of(conn: Connection, folder: Path, file_id: int, table: str) -> list[Leftover]:
    """What loads of one file left: its staging files, and `table` (its `filled_table`)."""
    paths = sorted(folder.glob(f"file-{file_id}-*.db")) if folder.is_dir() else []
    found = [Leftover(file_id, str(path), is_table=False) for path in paths]
    if inspect(conn).has_table(table):
        found.append(Leftover(file_id, table, is_table=True))
    return found


def remove(engine: Engine, leftover: Leftover) -> None:
    if leftover.is_table:
        with write_connection(engine) as conn, conn.begin():
            drop_table(conn, leftover.name)
    else:
        Path(leftover.name).unlink(missing_ok=True)


def staging_engine(path: Path) -> Engine:
    """An engine on a fresh scratch database at `path` (created 0600: it holds rows)."""
    path.unlink(missing_ok=True)
    prepare_sqlite_file(path)
    engine = create_engine(f"sqlite:///{path}", poolclass=NullPool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-16384"):
            dbapi_connection.execute(f"PRAGMA {pragma}")

    return engine


def create_staged_table(conn: Connection, columns: Sequence[Column]) -> None:
    drop_table(conn, STAGED_TABLE)
    create_table(conn, STAGED_TABLE, columns)


@contextmanager
def attached(conn: Connection, path: Path, *, scratch: bool = False) -> Iterator[None]:
    """The staging file readable as `stage.` on this connection (outside any
    transaction: ATTACH and DETACH cannot run inside one). `scratch`: a new file this
    connection writes, without journal or fsync (a new file is created 0600, as all of
    TALLY_HOME)."""
    driver = conn.connection.dbapi_connection
    assert driver is not None
    if scratch:
        prepare_sqlite_file(path)
    driver.execute(f"ATTACH DATABASE ? AS {STAGE_ALIAS}", (str(path),))
    if scratch:
        for pragma in ("journal_mode=OFF", "synchronous=OFF"):
            driver.execute(f"PRAGMA {STAGE_ALIAS}.{pragma}")
    try:
        yield
    finally:
        driver.execute(f"DETACH DATABASE {STAGE_ALIAS}")


def staged_row_ids(conn: Connection, staged: str = STAGED_TABLE) -> tuple[int, int]:
    low, high = conn.exec_driver_sql(
        f"SELECT min({ROW_ID}), max({ROW_ID}) FROM {STAGE_ALIAS}.{staged}"
    ).one()
    return int(low or 0), int(high or 0)


def fill_in_chunks(
    conn: Connection,
    table: str,
    columns: Sequence[Column],
    *,
    staged: str = STAGED_TABLE,
    converted: Sequence[str] | None = None,
    guard: Callable[[Connection], None] | None = None,
    file_id: int | None = None,
) -> None:
    """Copy the rows of the staged table `staged` into `table` (nothing reads it yet),
    CHUNK_ROWS per transaction, each after the writers waiting for the lock
    (`yield_to_writers`); `guard` runs first in each transaction (a derived run's
    lease). `converted`: the SQL reading each column's value out of a staged row (the
    raw text of a file's rows, converted on the way); by default the column of the same
    name. `file_id`: a source's file, every row's `_file_id`.

    Nothing reads `table` before a later transaction publishes it: the chunks commit
    without a sync of their own (`unsynced_commits`)."""
    physical = [c.physical for c in columns]
    into, values = with_file_id(
        ", ".join([ROW_ID, *physical]), ", ".join([ROW_ID, *(converted or physical)]), file_id
    )
    with conn.begin():
        low, high = staged_row_ids(conn, staged)
    with unsynced_commits(conn):
        for start in range(low, high + 1, CHUNK_ROWS):
            yield_to_writers(conn)
            with conn.begin():
                if guard is not None:
                    guard(conn)
                conn.exec_driver_sql(
                    f"INSERT INTO {table} ({into}) SELECT {values} FROM "
                    f"{STAGE_ALIAS}.{staged} WHERE {ROW_ID} >= ? AND {ROW_ID} < ?",
                    (start, start + CHUNK_ROWS),
                )


def append_staged(
    conn: Connection, table: str, columns: Sequence[Column], *, file_id: int | None = None
) -> None:
    """Append the staged rows to a live table, in their order (inside the publishing
    transaction: one statement, no conversion left to do); `file_id` as in
    `fill_in_chunks`."""
    names = ", ".join(c.physical for c in columns)
    into, values = with_file_id(names, names, file_id)
    conn.exec_driver_sql(
        f"INSERT INTO {table} ({into}) SELECT {values} FROM {STAGE_ALIAS}.{STAGED_TABLE} "
        f"ORDER BY {ROW_ID}"
    )


def replace_table(conn: Connection, table: str, filled: str) -> None:
    """`filled` becomes `table` (a placeholder's empty table is dropped)."""
    drop_table(conn, table)
    conn.exec_driver_sql(f"ALTER TABLE {filled} RENAME TO {table}")
