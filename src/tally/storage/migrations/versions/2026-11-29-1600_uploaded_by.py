"""Who sent each upload

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 16:00:00

Issue #33 (the console's source page): `files.uploaded_by`, the sender of an upload (a
console user's name, or `api key sha256:<fingerprint>`), as actions and files taken back
record who did them. NULL for a webhook's file and for uploads before this revision. A
nullable column only: a process of the previous version keeps working beside this one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("files", sa.Column("uploaded_by", sa.String(200), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN on both (SQLite >= 3.35), as in 0012
    op.execute("ALTER TABLE files DROP COLUMN uploaded_by")
