"""Apply the control-plane migrations; called at every start, so it must be idempotent.

Concurrent starts on PostgreSQL are serialised by an advisory lock; on SQLite the
write transaction does the same.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

from tally.storage.engine import backend_of, write_connection

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_MIGRATION_LOCK_ID = 7_303_001


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option(
        "file_template", "%%(year)d-%%(month).2d-%%(day).2d-%%(hour).2d%%(minute).2d_%%(slug)s"
    )
    return config


def upgrade_database(engine: Engine) -> None:
    config = alembic_config()
    with write_connection(engine) as conn:
        if backend_of(conn).is_postgresql:
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": _MIGRATION_LOCK_ID})
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        conn.commit()
