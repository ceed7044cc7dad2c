"""The outbox topic of status callbacks is `status_callback`

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 10:00:00

Issue #31 (one word per concept): "notification" is the inbound webhook call only; the
events fanned out to status-callback endpoints were written under the topic
`notification`. Unprocessed events move to `status_callback`, the topic the workers now
fan out; processed ones keep the old topic, which no job reads again. Not an addition:
an event a previous version's process writes after this revision waits, unsent, until
that process is stopped, so stop the old workers and API processes before upgrading.
The tables keep their names (`notification_endpoints`, `notification_deliveries`,
`notification_attempts`: docs/glossary.md).
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
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
