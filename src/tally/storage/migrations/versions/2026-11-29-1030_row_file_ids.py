"""Every source row says which file inserted it: `_file_id`, indexed

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 10:30:00

Issue #32 point 6: the Data API's system columns `_row` (the hidden `_row_id` every row
table has) and, for sources, `_file_id`. Every source's table (`r_<id>`, kind `source`,
placeholders included) gains `_file_id`; derived outputs get none (their rows come from
no file). The rows already there get NULL: which file inserted them is not recorded
anywhere reliable (row ids have gaps on PostgreSQL, and `tally admin load --append`
keeps no file record), so NULL says "not known", never a guess.

On PostgreSQL the column's DEFAULT reads the transaction's `tally.file_id` setting,
which each load sets (COPY takes no constants); adding a column with a non-volatile
default rewrites no row. The index on `_file_id` is the one the workers build with a
new source's per-column indexes (`ix_r_<id>__file_id`): a file's rows found without a
scan, to take a file back. Building it reads each table once (about a second a million
rows).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_PG_DEFAULT = "NULLIF(current_setting('tally.file_id', true), '')::bigint"


def _source_tables(bind: sa.Connection) -> list[tuple[str, bool]]:
    """Each source's row table, and whether it has `_file_id` already (made by a
    process of this version meanwhile)."""
    found = bind.execute(sa.text("SELECT id FROM resources WHERE kind = 'source' ORDER BY id"))
    tables = []
    for (resource_id,) in found.all():
        table = f"r_{resource_id}"
        inspector = sa.inspect(bind)
        if inspector.has_table(table):
            has = any(c["name"] == "_file_id" for c in inspector.get_columns(table))
            tables.append((table, has))
    return tables


def upgrade() -> None:
    bind = op.get_bind()
    postgresql = bind.dialect.name == "postgresql"
    for table, has_file_ids in _source_tables(bind):
        if has_file_ids:
            continue
        if postgresql:
            op.execute(f"ALTER TABLE {table} ADD COLUMN _file_id BIGINT DEFAULT {_PG_DEFAULT}")
            op.execute(
                f"CREATE INDEX IF NOT EXISTS ix_{table}__file_id "
                f"ON {table} (_file_id NULLS FIRST, _row_id)"
            )
        else:
            op.execute(f"ALTER TABLE {table} ADD COLUMN _file_id INTEGER")
            op.execute(f"CREATE INDEX IF NOT EXISTS ix_{table}__file_id ON {table} (_file_id)")


def downgrade() -> None:
    """The column and its index dropped: which file inserted each row is lost."""
    for table, has_file_ids in _source_tables(op.get_bind()):
        if has_file_ids:
            op.execute(f"DROP INDEX IF EXISTS ix_{table}__file_id")
            op.execute(f"ALTER TABLE {table} DROP COLUMN _file_id")
