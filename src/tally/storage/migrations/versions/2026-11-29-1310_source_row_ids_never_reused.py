"""SQLite: a source's row ids are never given twice (AUTOINCREMENT)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29 13:10:00

Issue #32: once a file's rows can be taken back or a snapshot replaced, SQLite's plain
`INTEGER PRIMARY KEY` would give a new row the id of a removed one (max + 1), and `_row`
would name two rows over time. New source tables are created AUTOINCREMENT
(`ddl.source_row_id`); each existing source table on SQLite is rebuilt so (SQLite cannot
add it to a table): copied with its row ids, its indexes made again from their own SQL
text. Nothing changes on PostgreSQL, whose identity never gives an id twice. The copy
reads each table once (a few seconds a million rows).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_PLAIN = "_row_id INTEGER PRIMARY KEY,"
_NEVER_REUSED = "_row_id INTEGER PRIMARY KEY AUTOINCREMENT,"


def upgrade() -> None:
    _rebuild_sources(_PLAIN, _NEVER_REUSED)


def downgrade() -> None:
    _rebuild_sources(_NEVER_REUSED, _PLAIN)


def _rebuild_sources(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    found = bind.execute(sa.text("SELECT id FROM resources WHERE kind = 'source' ORDER BY id"))
    for (resource_id,) in found.all():
        _rebuild(bind, f"r_{resource_id}", old, new)


def _rebuild(bind: sa.Connection, table: str, old: str, new: str) -> None:
    """`table` made again with `new` in place of `old` in its definition (nothing to do
    when it has no such definition: missing, or made by this version already)."""
    row = bind.execute(
        sa.text("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = :t"), {"t": table}
    ).one_or_none()
    if row is None or old not in row[0]:
        return
    indexes = [
        sql
        for (sql,) in bind.execute(
            sa.text(
                "SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = :t "
                "AND sql IS NOT NULL ORDER BY name"
            ),
            {"t": table},
        )
    ]
    copy = f"{table}__rebuilt"
    definition = row[0].replace(old, new, 1)
    op.execute(definition.replace(table, copy, 1))
    op.execute(f"INSERT INTO {copy} SELECT * FROM {table}")
    op.execute(f"DROP TABLE {table}")
    op.execute(f"ALTER TABLE {copy} RENAME TO {table}")
    for sql in indexes:
        op.execute(sql)
