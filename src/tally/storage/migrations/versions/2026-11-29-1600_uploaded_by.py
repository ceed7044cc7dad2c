"""Who sent each upload; each failed attempt of a file

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29 16:00:00

Issue #33 (the console's source page): `files.uploaded_by`, the sender of an upload (a
console user's name, or `api key sha256:<fingerprint>`), as actions and files taken back
record who did them. NULL for a webhook's file and for uploads before this revision. A
nullable column only: a process of the previous version keeps working beside this one.
`file_attempts`: each attempt that did not deliver a file (its error, when it ended, when
the next was due), so the source page shows a file's attempts, not only their count and
the last error; none for attempts before this revision. Two indexes for the source
page's status notifications, a page read by index however many there are:
`outbox_events (resource_id, id)` and `notification_deliveries (event_id)`.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("files", sa.Column("uploaded_by", sa.String(200), nullable=True))
    op.create_table(
        "file_attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("file_id", sa.Integer(), nullable=False),
        sa.Column("attempt_number", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["file_id"], ["files.id"], name="fk_file_attempts_file_id_files"),
        sa.PrimaryKeyConstraint("id", name="pk_file_attempts"),
    )
    op.create_index("ix_file_attempts_file_id", "file_attempts", ["file_id"])
    op.create_index("ix_outbox_events_resource_id", "outbox_events", ["resource_id", "id"])
    op.create_index("ix_notification_deliveries_event_id", "notification_deliveries", ["event_id"])


def downgrade() -> None:
    op.drop_index("ix_notification_deliveries_event_id", table_name="notification_deliveries")
    op.drop_index("ix_outbox_events_resource_id", table_name="outbox_events")
    op.drop_index("ix_file_attempts_file_id", table_name="file_attempts")
    op.drop_table("file_attempts")
    # ALTER TABLE ... DROP COLUMN on both (SQLite >= 3.35), as in 0012
    op.execute("ALTER TABLE files DROP COLUMN uploaded_by")
