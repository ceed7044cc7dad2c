"""Apply the control-plane migrations; called at every start, so it must be idempotent.

Concurrent starts on PostgreSQL are serialised by an advisory lock; on SQLite the
write transaction does the same. A database already at the head is told by one read,
without alembic (`is_at_head`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

from tally.storage.engine import backend_of, write_connection

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"  # alembic's default, where it keeps the revision
_MIGRATION_LOCK_ID = 7_303_001
# `revision = "0019"`, `down_revision = "0018"` (or None): how every file names itself
# and the one it follows (alembic's template).
_REVISION_LINE = re.compile(r'^(revision|down_revision) = (?:"([^"]+)"|None)$', re.MULTILINE)


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option(
        "file_template", "%%(year)d-%%(month).2d-%%(day).2d-%%(hour).2d%%(minute).2d_%%(slug)s"
    )
    return config


def upgrade_database(engine: Engine) -> None:
    if is_at_head(engine):
        return
    # alembic only now: importing it, walking the migrations and opening its context
    # took ~0.15 s of CPU with nothing to apply, a quarter of what a `tally admin`
    # command's start-up came to without it (issue #36).
    from alembic import command

    config = alembic_config()
    with write_connection(engine) as conn:
        if backend_of(conn).is_postgresql:
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        conn.commit()


def is_at_head(engine: Engine) -> bool:
    """Whether the database is at `head_revision()`. A revision is committed with the
    migration that reached it, so a database read at the head needs nothing, and one
    being upgraded by another process is not at the head yet (the caller then waits for
    it in `upgrade_database`'s lock)."""
    head = head_revision()
    if head is None:
        return False
    with engine.connect() as conn:
        if not inspect(conn).has_table(VERSION_TABLE):
            return False
        stored = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return stored == [head]


def head_revision() -> str | None:
    """The one revision no migration follows, read from the files' text (alembic's own
    walk imports each of them); None when the files do not name exactly one, for
    alembic to decide."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        lines = _REVISION_LINE.finditer(path.read_text())
        names: dict[str, str | None] = {line[1]: line[2] for line in lines}
        revision, follows = names.get("revision"), names.get("down_revision")
        if revision is None:
            return None
        revisions.add(revision)
        if follows is not None:
            followed.add(follows)
    heads = revisions - followed
    return heads.pop() if len(heads) == 1 else None
