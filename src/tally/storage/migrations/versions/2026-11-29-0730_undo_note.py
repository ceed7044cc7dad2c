"""An undone manual match keeps why

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29 07:30:00

`reconciliation_actions.undo_note` is the note of the DELETE that dissolved a manual
match (issue #30); NULL for every action not undone that way. An addition: a process of
the previous version keeps working beside this one during an upgrade.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.add_column(sa.Column("undo_note", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.drop_column("undo_note")
