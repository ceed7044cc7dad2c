"""A source declares the encoding of its files; a file may record its own

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 09:50:00

`resources.encoding` is the encoding every file of the source is read in, strictly
(decision 0015); existing sources get UTF-8, the default. `files.encoding` is set only
for bytes tally made itself (CSV converted from JSON rows: UTF-8); NULL everywhere else
means the source's. Both columns are additions: a process of the previous version
keeps working beside this one during an upgrade.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("resources") as batch:
        batch.add_column(
            sa.Column("encoding", sa.String(50), nullable=False, server_default="utf-8")
        )
    with op.batch_alter_table("files") as batch:
        batch.add_column(sa.Column("encoding", sa.String(50), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("files") as batch:
        batch.drop_column("encoding")
    with op.batch_alter_table("resources") as batch:
        batch.drop_column("encoding")
