"""Snapshot sources, files taken back, manual work carried or retired with its reason

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 13:00:00

Issue #32 points 5 and 7. `resources.mode`: `append` (every source until now, and the
default) or `replace` (each file replaces the source's rows). `resources.removed_version`:
the data version at which rows were last removed (a snapshot replaced, a file taken
back); 0: never, so incremental runs know when "rows only grew" no longer holds.
`files.retracted_at`/`retracted_by` and the status `retracted`. On reconciliation
actions, `retired_reason` says why an action stopped being in force without an analyst
undoing it, and `carried_from` names the action a carried one continues.

The files' status CHECK gains `retracted`. On PostgreSQL the constraint is replaced. On
SQLite a CHECK constraint is part of the table's text, and the table is one that other
tables' foreign keys point at, so it is not copied: its text in sqlite_schema is edited
with `writable_schema`, the way SQLite's documentation gives for a change that needs no
row rewritten (a constraint that accepts more than before), and the schema version bumped
so every connection rereads it. Every change is an addition: a process of the previous
version keeps working beside this one (it neither writes nor reads the new columns).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_OLD_STATUSES = "'queued', 'downloading', 'loading', 'delivered', 'duplicate', 'failed'"
_NEW_STATUSES = f"{_OLD_STATUSES}, 'retracted'"


def upgrade() -> None:
    op.add_column(
        "resources", sa.Column("mode", sa.String(10), nullable=False, server_default="append")
    )
    op.add_column(
        "resources",
        sa.Column("removed_version", sa.BigInteger(), nullable=False, server_default="0"),
    )
    op.add_column("files", sa.Column("retracted_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("files", sa.Column("retracted_by", sa.String(200), nullable=True))
    op.add_column("reconciliation_actions", sa.Column("retired_reason", sa.Text(), nullable=True))
    op.add_column("reconciliation_actions", sa.Column("carried_from", sa.Integer(), nullable=True))
    _statuses(_OLD_STATUSES, _NEW_STATUSES)


def downgrade() -> None:
    """Retracted files become failed ones (their rows are gone either way)."""
    op.execute("UPDATE files SET status = 'failed', error = 'retracted' WHERE status = 'retracted'")
    _statuses(_NEW_STATUSES, _OLD_STATUSES)
    for table, column in (
        ("reconciliation_actions", "carried_from"),
        ("reconciliation_actions", "retired_reason"),
        ("files", "retracted_by"),
        ("files", "retracted_at"),
        ("resources", "removed_version"),
        ("resources", "mode"),
    ):
        # ALTER TABLE ... DROP COLUMN on both (SQLite >= 3.35), as in 0011
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")


def _statuses(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("ALTER TABLE files DROP CONSTRAINT ck_files_status")
        op.execute(f"ALTER TABLE files ADD CONSTRAINT ck_files_status CHECK (status IN ({new}))")
        return
    driver = bind.connection.driver_connection
    assert driver is not None
    (sql,) = driver.execute("SELECT sql FROM sqlite_schema WHERE name = 'files'").fetchone()
    if f"({old})" not in sql:
        raise RuntimeError(f"the files table's status CHECK is not the one expected: {sql}")
    (version,) = driver.execute("PRAGMA schema_version").fetchone()
    driver.execute("PRAGMA writable_schema = ON")
    try:
        driver.execute(
            "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = 'files'",
            (sql.replace(f"({old})", f"({new})"),),
        )
        driver.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        driver.execute("PRAGMA writable_schema = OFF")
