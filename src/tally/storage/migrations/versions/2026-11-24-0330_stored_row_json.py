"""Row tables keep each row's JSON object text; resources record when all rows have it

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 03:30:00

A hidden `_json` column in every row table holds the row as a page renders it, stored by
a worker after a load (decision 0011); pages read it where it is set and render the row
where it is NULL, so the tables already there start with NULL everywhere and lose
nothing. `resources.rendered_version` tells the workers which resources still have rows
without it: 0 everywhere, so every existing resource is taken up once.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _has_table(bind: sa.Connection, table: str) -> bool:
    return sa.inspect(bind).has_table(table)


def upgrade() -> None:
    with op.batch_alter_table("resources") as batch:
        batch.add_column(
            sa.Column("rendered_version", sa.BigInteger(), nullable=False, server_default="0")
        )
    bind = op.get_bind()
    for (resource_id,) in bind.execute(sa.text("SELECT id FROM resources ORDER BY id")).all():
        table = f"r_{resource_id}"
        if _has_table(bind, table):
            op.execute(f"ALTER TABLE {table} ADD COLUMN _json TEXT")


def downgrade() -> None:
    raise NotImplementedError("row tables are not converted back")
