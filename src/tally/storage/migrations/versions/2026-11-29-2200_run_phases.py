"""The phase a derived resource's run is in

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-29 22:00:00

Issue #35: GET of a reconciliation or a transformation says what a run under way is
doing (reading, matching, writing, publishing, indexing) and since when. Three nullable
columns of `derived_resources`, written by the claim and at each change of phase, null
when no run is under way. Expand only: a process of the previous version keeps working
beside this one (its runs show no phase).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

COLUMNS = ("run_started_at", "run_phase", "run_phase_since")


def upgrade() -> None:
    op.add_column("derived_resources", sa.Column("run_started_at", sa.DateTime(timezone=True)))
    op.add_column("derived_resources", sa.Column("run_phase", sa.String(length=20)))
    op.add_column("derived_resources", sa.Column("run_phase_since", sa.DateTime(timezone=True)))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite >= 3.35): a batch operation would copy the
    # table other tables' foreign keys point at
    for name in reversed(COLUMNS):
        op.execute(f"ALTER TABLE derived_resources DROP COLUMN {name}")
