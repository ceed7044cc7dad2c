"""A source declares its files' layout; a file records the load's warnings

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29 10:30:00

Issue #32 (formats per column): `resources.file_layout` holds the leading and trailing
lines a source's files skip and its declared columns' formats (dates, decimal and
thousands separators, negative forms), as JSON; NULL, as for every existing source,
means none. `files.warnings` holds what a load noticed without failing the file (a
column of dates in a format tally does not guess, kept as text). Both columns are
additions: a process of the previous version keeps working beside this one during an
upgrade (it ignores the layout, so declare layouts only once every process is upgraded).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("resources", sa.Column("file_layout", sa.JSON(), nullable=True))
    op.add_column("files", sa.Column("warnings", sa.JSON(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN on both (SQLite >= 3.35): a batch operation would
    # copy the tables other tables' foreign keys point at
    op.execute("ALTER TABLE files DROP COLUMN warnings")
    op.execute("ALTER TABLE resources DROP COLUMN file_layout")
