"""The control plane's tables: one MetaData, the source of truth alembic is checked against.

Rows of resources live in tables of their own (see resource_tables.py); this schema
holds who owns what, and each resource's columns and data version.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

accounts = Table(
    "accounts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("allowed_origins", JSON, nullable=False, default=list),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

workspaces = Table(
    "workspaces",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("account_id", ForeignKey("accounts.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("ingestion_enabled", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

folders = Table(
    "folders",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

resources = Table(
    "resources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("folder_id", ForeignKey("folders.id"), nullable=True),
    Column("name", String(200), nullable=False),
    Column("kind", String(20), nullable=False),
    # [{"name", "physical", "type", "scale"?, "timezone"?}, ...] in display order
    Column("columns", JSON, nullable=False),
    # Placeholder sources take their columns from their first file.
    Column("is_placeholder", Boolean, nullable=False, default=False),
    Column("data_version", BigInteger, nullable=False, default=0),
    Column("row_count", BigInteger, nullable=False, default=0),
    Column("indexed_version", BigInteger, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("workspace_id", "name"),
    CheckConstraint("kind IN ('source', 'reconciliation', 'transformation')", name="kind"),
)
