"""PostgreSQL row tables keep decimals as NUMERIC(38, scale), timestamps as TIMESTAMP(TZ)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 12:00:00

Until now both backends stored a decimal as an integer scaled by 10**scale and a
timestamp as canonical ISO text. PostgreSQL now stores its own types, which its COPY
writes straight from a file's text (see storage/resource_tables/ddl.py). This converts the
row tables already there, exactly: n * 10**-scale is an exact NUMERIC, and canonical
text (UTC for a column with offsets) is read as the timestamp it spells. SQLite is
unchanged.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def _new_type(column: dict[str, object]) -> tuple[str, str] | None:
    """(type, USING expression) for a column whose PostgreSQL storage changes."""
    physical = str(column["physical"])
    if column["type"] == "decimal":
        scale = int(str(column.get("scale", 0)))
        # NUMERIC(38, scale): storage/resource_tables/ddl.py's type for a decimal column
        return (
            f"NUMERIC(38, {scale})",
            f"{physical}::numeric * 1e-{scale}::numeric" if scale else physical,
        )
    if column["type"] == "timestamp":
        if column.get("timezone"):
            return "TIMESTAMPTZ", f"({physical} || 'Z')::timestamptz"
        return "TIMESTAMP", f"{physical}::timestamp"
    return None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    found = bind.execute(sa.text("SELECT id, columns FROM resources ORDER BY id")).all()
    for resource_id, columns in found:
        table = f"r_{resource_id}"
        if bind.execute(sa.text("SELECT to_regclass(:t)"), {"t": table}).scalar() is None:
            continue
        changes = [
            f"ALTER COLUMN {c['physical']} TYPE {new[0]} USING {new[1]}"
            for c in columns
            if (new := _new_type(c)) is not None
        ]
        if changes:
            op.execute(f"ALTER TABLE {table} {', '.join(changes)}")


def downgrade() -> None:
    raise NotImplementedError("row tables are not converted back")
