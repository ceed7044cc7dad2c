"""One-sided resolutions: an action of kind `resolve` with its reason code

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29 16:00:00

Issue #34 (the reconciliation workbench): rows of one side an analyst closes with no
counterpart (a bank fee) are an action of kind `resolve`, kept like the others, with
its reason code in `reconciliation_actions.reason`; a resolution is no match, so its
`match_id` is NULL. Expand only: a nullable column, a wider check, a NOT NULL lifted.
A process of the previous version keeps working beside this one (it never writes a
resolution; it reads one as an action of a kind it does not know, which no earlier
version is ever given while the two run side by side).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

KIND = "kind"  # ck_reconciliation_actions_kind, by the naming convention


def upgrade() -> None:
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.add_column(sa.Column("reason", sa.String(length=40), nullable=True))
        batch.alter_column("match_id", existing_type=sa.Integer(), nullable=True)
        batch.drop_constraint(KIND, type_="check")
        batch.create_check_constraint(
            "kind", sa.text("kind IN ('match', 'confirm', 'reject', 'resolve')")
        )


def downgrade() -> None:
    op.execute("DELETE FROM reconciliation_actions WHERE kind = 'resolve'")
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.drop_constraint(KIND, type_="check")
        batch.create_check_constraint("kind", sa.text("kind IN ('match', 'confirm', 'reject')"))
        batch.alter_column("match_id", existing_type=sa.Integer(), nullable=False)
        batch.drop_column("reason")
