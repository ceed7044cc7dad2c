"""`alembic upgrade head` on an empty database gives exactly storage/schema.py."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from tally.runtime import Runtime
from tally.storage.migrate import upgrade_database
from tally.storage.schema import metadata


def test_migrations_match_the_schema(runtime: Runtime) -> None:
    with runtime.engine.connect() as conn:
        context = MigrationContext.configure(conn)
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_upgrading_twice_changes_nothing(runtime: Runtime) -> None:
    upgrade_database(runtime.engine)  # a second start, a second process
    with runtime.engine.connect() as conn:
        context = MigrationContext.configure(conn)
        assert context.get_current_revision() == "0002"
        assert compare_metadata(context, metadata) == []
