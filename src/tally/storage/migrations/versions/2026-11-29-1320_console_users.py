"""The console's users, invites, sessions and sign-in failures; who took each action

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 13:20:00

Issue #33 (the console): `users` (one workspace, a role, an argon2id hash once an
invite is used), `user_invites` and `console_sessions` (each kept as the sha256 of its
secret, never the secret), `sign_in_failures` (wrong passwords in a row per username).
`reconciliation_actions.actor` and `undo_actor`: who took an action and who dissolved it
(a console user's name, or `api key sha256:<fingerprint>`), NULL for older actions.
New tables and nullable columns only: a process of the previous version keeps working
beside this one (its actions have no actor).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reconciliation_actions") as batch:
        batch.add_column(sa.Column("actor", sa.String(length=250), nullable=True))
        batch.add_column(sa.Column("undo_actor", sa.String(length=250), nullable=True))
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("workspace_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("name_key", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=200), nullable=True),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("role IN ('viewer', 'analyst', 'admin')", name="ck_users_role"),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name="fk_users_workspace_id_workspaces"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name_key", name="uq_users_name_key"),
    )
    op.create_index("ix_users_workspace_id", "users", ["workspace_id"])
    op.create_table(
        "user_invites",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name="fk_user_invites_user_id_users"),
        sa.PrimaryKeyConstraint("id", name="pk_user_invites"),
        sa.UniqueConstraint("token_hash", name="uq_user_invites_token_hash"),
    )
    op.create_index("ix_user_invites_user_id", "user_invites", ["user_id"])
    op.create_table(
        "console_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name="fk_console_sessions_user_id_users"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_console_sessions"),
        sa.UniqueConstraint("session_hash", name="uq_console_sessions_session_hash"),
    )
    op.create_index("ix_console_sessions_user_id", "console_sessions", ["user_id"])
    op.create_table(
        "sign_in_failures",
        sa.Column("name_key", sa.String(length=200), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("name_key", name="pk_sign_in_failures"),
    )


def downgrade() -> None:
    op.execute("ALTER TABLE reconciliation_actions DROP COLUMN undo_actor")
    op.execute("ALTER TABLE reconciliation_actions DROP COLUMN actor")
    op.drop_table("sign_in_failures")
    op.drop_table("console_sessions")
    op.drop_table("user_invites")
    op.drop_table("users")
