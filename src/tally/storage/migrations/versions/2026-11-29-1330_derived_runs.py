"""The history of derived resources' runs

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29 13:30:00

Issue #33 (the transformation page: "its last runs"): `derived_runs`, one row per
finished run of a reconciliation or a transformation (succeeded, or failed with its
error in full), the last 50 of each. `derived_resources.last_run` stays as it is. A new
table only: a process of the previous version keeps working beside this one (its runs
are not kept in the history).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "derived_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("derived_id", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=20), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("outcome IN ('succeeded', 'failed')", name="ck_derived_runs_outcome"),
        sa.ForeignKeyConstraint(
            ["derived_id"],
            ["derived_resources.id"],
            name="fk_derived_runs_derived_id_derived_resources",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_derived_runs"),
    )
    op.create_index("ix_derived_runs_derived_id_id", "derived_runs", ["derived_id", "id"])


def downgrade() -> None:
    op.drop_table("derived_runs")
