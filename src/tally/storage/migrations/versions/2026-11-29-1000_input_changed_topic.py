"""The outbox topic that wakes the derived runs is `input_changed`

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 10:00:00

An input's rows changed (a file delivered, rows appended): every derived resource
reading it runs again, whatever its kind. The topic was written `reconciliation`; the
events not processed yet are renamed, so the workers, which read the new name, still
queue their runs. Processed events keep the old name: nothing reads them by topic. A
process of the previous version may still write the old name during an upgrade: the
workers read it too (storage/outbox.py's `INPUT_CHANGED_BEFORE_0008`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

OLD, NEW = "reconciliation", "input_changed"


def upgrade() -> None:
    _rename_pending(OLD, NEW)


def downgrade() -> None:
    _rename_pending(NEW, OLD)


def _rename_pending(old: str, new: str) -> None:
    op.get_bind().execute(
        sa.text(
            "UPDATE outbox_events SET topic = :new WHERE topic = :old AND processed_at IS NULL"
        ),
        {"old": old, "new": new},
    )
