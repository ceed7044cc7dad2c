"""TALLY_HOME is private to the user tally runs as: its folders 0700, every file tally
writes there 0600 (the SQLite database, whose WAL and SHM files SQLite creates with the
database's own mode; kept files; the secret key; demo.env).

Files are created with their mode, never loosened and tightened afterwards, so there is
no moment another user could open one. A home an earlier version left open is closed at
start: with the folder at 0700, no other user reaches any file below it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")

log = logging.getLogger("tally.home")


def make_private_dir(path: Path) -> Path:
    """`path`, made with every missing folder above it at 0700 (`mkdir(parents=True)`
    would give those the default mode)."""
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
    return path


def open_private(path: Path, *, exclusive: bool = False) -> int:
    """A file descriptor for writing `path`, created 0600 if it does not exist (with
    `exclusive`, it must not). The caller closes it (`os.fdopen`)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    return os.open(path, flags, PRIVATE_FILE_MODE)


def create_new_private_file(path: Path) -> None:
    """Create `path` empty and 0600 unless it exists; a file that exists is not opened.

    Why never opened: POSIX record locks belong to a process and a file, not to a
    descriptor, so closing *any* descriptor of a SQLite database drops every lock the
    process's connections hold on it (SQLite's own opens know this and defer their
    closes; an `os.open` beside them cannot). Another process then finds the database
    unused, checkpoints it and deletes its write-ahead log while this process still
    writes to it: acknowledged writes lost (issue #30). O_EXCL fails on an existing file
    before any descriptor exists; a file it creates is new, and no lock is on it yet."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    os.close(descriptor)


def write_private(path: Path, data: bytes) -> None:
    """Write `path` (replacing it) readable by its owner only, even if it existed."""
    with os.fdopen(open_private(path), "wb") as handle:
        os.fchmod(handle.fileno(), PRIVATE_FILE_MODE)
        handle.write(data)


def prepare_home(home: Path) -> None:
    """Make TALLY_HOME, or close one an earlier version made with the default modes."""
    make_private_dir(home)
    _close(home, PRIVATE_DIR_MODE)


def prepare_sqlite_file(path: Path) -> None:
    """Create the database file 0600 before SQLite does (SQLite gives its WAL and SHM
    files the database's mode), and close the files an earlier version left open.

    A database file that exists is never opened here: see `create_new_private_file`."""
    make_private_dir(path.parent)
    create_new_private_file(path)
    for name in (path.name, *(path.name + suffix for suffix in SQLITE_COMPANIONS)):
        if (path.parent / name).exists():
            _close(path.parent / name, PRIVATE_FILE_MODE)


def _close(path: Path, mode: int) -> None:
    """Take every permission of group and others off `path`."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode & 0o077:
        try:
            path.chmod(current & mode)
        except PermissionError:  # not ours: say so, and carry on as before
            log.warning("home_not_private", extra={"path": str(path), "mode": oct(current)})
            return
        log.info("home_made_private", extra={"path": str(path), "was": oct(current)})
