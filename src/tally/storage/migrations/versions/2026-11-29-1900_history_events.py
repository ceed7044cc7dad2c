"""A reconciliation's history events: actions of kind `define` and `run`

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-29 19:00:00

Issue #34 (the workbench's history): a definition replaced and a run asked for are kept
as actions with their actor, beside the manual work, so the history says who did what.
They name no rows and are never in force. Expand only: a wider check. A process of the
previous version keeps working beside this one: it reads manual work with its own
queries, which these kinds never change (they name no rows: no manual match, rejection
or resolution is made of them).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

KIND = "kind"  # ck_reconciliation_actions_kind, by the naming convention
BEFORE = "kind IN ('match', 'confirm', 'reject', 'resolve')"
AFTER = "kind IN ('match', 'confirm', 'reject', 'resolve', 'define', 'run')"


def upgrade() -> None:
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.drop_constraint(KIND, type_="check")
        batch.create_check_constraint(KIND, sa.text(AFTER))


def downgrade() -> None:
    op.execute("DELETE FROM reconciliation_actions WHERE kind IN ('define', 'run')")
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.drop_constraint(KIND, type_="check")
        batch.create_check_constraint(KIND, sa.text(BEFORE))
