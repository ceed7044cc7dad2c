"""Derived resources (reconciliations, transformations), their inputs, manual actions

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 12:15:00

New tables only: a process of the previous version keeps working beside this one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "derived_resources",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "workspace_id", sa.Integer, sa.ForeignKey("workspaces.id"), nullable=False, index=True
        ),
        sa.Column(
            "resource_id", sa.Integer, sa.ForeignKey("resources.id"), nullable=False, unique=True
        ),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("definition", sa.JSON, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("run_due_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("lease_owner", sa.String(100), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_run", sa.JSON, nullable=True),
        sa.Column("output_digest", sa.String(64), nullable=True),
        sa.Column("run_basis", sa.JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('reconciliation', 'transformation')", name="kind"),
        sa.CheckConstraint("state IN ('queued', 'running', 'idle', 'failed')", name="state"),
    )
    op.create_index("ix_derived_resources_due", "derived_resources", ["run_due_at"])
    op.create_table(
        "derived_inputs",
        sa.Column(
            "derived_id", sa.Integer, sa.ForeignKey("derived_resources.id"), primary_key=True
        ),
        sa.Column(
            "resource_id", sa.Integer, sa.ForeignKey("resources.id"), primary_key=True, index=True
        ),
    )
    op.create_table(
        "reconciliation_actions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(
            "derived_id",
            sa.Integer,
            sa.ForeignKey("derived_resources.id"),
            nullable=False,
            index=True,
        ),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("match_id", sa.Integer, nullable=False),
        sa.Column("left_rows", sa.JSON, nullable=False),
        sa.Column("right_rows", sa.JSON, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("undone_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('match', 'confirm', 'reject')", name="kind"),
    )


def downgrade() -> None:
    op.drop_table("reconciliation_actions")
    op.drop_table("derived_inputs")
    op.drop_index("ix_derived_resources_due", "derived_resources")
    op.drop_table("derived_resources")
