"""The outbox topic of status callbacks is `status_callback`

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29 10:10:00

Issue #31 (one word per concept): "notification" is the inbound webhook call only; the
events fanned out to status-callback endpoints were written under the topic
`notification`. Unprocessed events move to `status_callback`, the topic the workers now
fan out; processed ones keep the old topic, which no job reads again. The fan-out reads
the old topic too (`outbox.STATUS_CALLBACK_BEFORE_0009`), as a process of the previous
version may still write it during an upgrade (as revision 0008 does for input changes).
The tables keep their names (`notification_endpoints`, `notification_deliveries`,
`notification_attempts`: docs/glossary.md).
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _move_pending("notification", "status_callback")


def downgrade() -> None:
    _move_pending("status_callback", "notification")


def _move_pending(old: str, new: str) -> None:
    op.execute(
        f"UPDATE outbox_events SET topic = '{new}' WHERE topic = '{old}' AND processed_at IS NULL"
    )
