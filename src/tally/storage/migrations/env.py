"""Alembic environment: always run on a connection handed in by `upgrade_database`."""

from __future__ import annotations

from alembic import context

from tally.storage.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
