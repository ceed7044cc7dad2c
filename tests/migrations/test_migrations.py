"""`alembic upgrade head` gives exactly storage/schema.py, and data migrations keep every
value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from support.databases import make_settings
from support.factories import make_source, make_tenant, read_body, read_data
from tally.core.clock import utc_now
from tally.runtime import Runtime, build_runtime
from tally.storage import outbox, resources
from tally.storage.migrate import alembic_config, upgrade_database
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
        assert context.get_current_revision() == "0009"
        assert compare_metadata(context, metadata) == []


def test_postgresql_row_tables_of_revision_0002_keep_every_value(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """0003: PostgreSQL row tables go from scaled integers and canonical text to NUMERIC
    and TIMESTAMP(TZ). A table is put back into 0002's layout, upgraded, and must read
    back exactly as before, filters and ordering included."""
    settings = make_settings(request, "postgresql", tmp_path / "home")
    queries: list[dict[str, Any]] = [
        {},
        {"ordering": "-amount"},
        {"filters": [("amount__gt", "0.5")]},
        {"filters": [("at__lt", "2024-01-05T09:00:00Z")], "ordering": "local"},
        {"filters": [("local", "2024-01-05T10:30:00.25")]},
    ]
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        resource = make_source(
            runtime.engine,
            tenant,
            "id,amount,at,local\n"
            "1,10.5,2024-01-05T10:30:00+02:00,2024-01-05 10:30:00.25\n"
            "2,-0.01,2024-01-05T23:00:00-01:30,2024-01-05T10:30\n"
            "3,,,\n",
        )
        before = [read_data(runtime, tenant, resource.id, **q) for q in queries]
        table = resource.table_name
        with runtime.engine.begin() as conn:
            conn.exec_driver_sql(
                f"ALTER TABLE {table} "
                "ALTER COLUMN c1 TYPE bigint USING (c1 * 100)::bigint, "
                'ALTER COLUMN c2 TYPE text COLLATE "C" '
                "USING replace((c2 AT TIME ZONE 'UTC')::text, ' ', 'T'), "
                "ALTER COLUMN c3 TYPE text COLLATE \"C\" USING replace(c3::text, ' ', 'T')"
            )
            _back_to_revision_0003(conn, table)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0002'")
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades; and no response cached before
    try:
        with runtime.engine.connect() as conn:
            types = conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns "
                f"WHERE table_name = '{table}' ORDER BY ordinal_position"
            ).scalars()
            assert list(types) == [
                "bigint",
                "bigint",
                "numeric",
                "timestamp with time zone",
                "timestamp without time zone",
                "text",  # _json, from 0004
            ]
        assert [read_data(runtime, tenant, resource.id, **q) for q in queries] == before
    finally:
        runtime.close()


def _rows_without_json(runtime: Runtime, table: str) -> int:
    with runtime.engine.connect() as conn:
        sql = f"SELECT count(*) FROM {table} WHERE _json IS NULL"
        return int(conn.exec_driver_sql(sql).scalar_one())


def _back_to_revision_0003(conn: Any, table: str) -> None:
    """Undo 0006, 0005 and 0004: no derived resources, no declared encodings, no stored row JSON, no
    `rendered_version`."""
    _back_to_revision_0004(conn)
    conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN _json")
    conn.exec_driver_sql("ALTER TABLE resources DROP COLUMN rendered_version")


def _back_to_revision_0004(conn: Any) -> None:
    """Undo 0009, 0006 and 0005: no file layouts or warnings, no derived resources, no
    declared encodings."""
    _back_to_revision_0008(conn)
    for table in ("reconciliation_actions", "derived_inputs", "derived_resources"):
        conn.exec_driver_sql(f"DROP TABLE {table}")
    conn.exec_driver_sql("ALTER TABLE files DROP COLUMN encoding")
    conn.exec_driver_sql("ALTER TABLE resources DROP COLUMN encoding")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sources_of_revision_0004_read_their_files_as_utf8(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0005: every source gains an encoding, UTF-8 for those made before it."""
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        resource = make_source(runtime.engine, tenant, "id,name\n1,café\n")
        with runtime.engine.begin() as conn:
            _back_to_revision_0004(conn)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0004'")
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades
    try:
        with runtime.engine.connect() as conn:
            assert resources.get_resource(conn, resource.id).encoding == "utf-8"
        assert read_data(runtime, tenant, resource.id) == [{"id": 1, "name": "café"}]
    finally:
        runtime.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_row_tables_of_revision_0003_read_the_same_and_get_their_row_json(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0004: row tables gain `_json` (NULL: rows are rendered as they are read), and a
    worker's job stores every row's text; the pages read the same bytes all along."""
    settings = make_settings(request, backend, tmp_path / "home")
    queries: list[dict[str, Any]] = [{}, {"ordering": "-amount"}, {"fields": "id,at,amount"}]
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        resource = make_source(
            runtime.engine,
            tenant,
            'id,amount,at,memo\n1,10.5,2024-01-05T10:30:00+02:00,"a ""quoted"" é"\n'
            "2,-0.01,2024-01-05T23:00:00-01:30,\n3,,,x\n",
        )
        before = [read_body(runtime, tenant, resource.id, **q) for q in queries]
        with runtime.engine.begin() as conn:
            _back_to_revision_0003(conn, resource.table_name)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0003'")
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades; and no response cached before
    try:
        assert _rows_without_json(runtime, resource.table_name) == 3
        assert [read_body(runtime, tenant, resource.id, **q) for q in queries] == before
        assert runtime.catalogue.finish_one_unfinished() is True
        assert _rows_without_json(runtime, resource.table_name) == 0
        assert [read_body(runtime, tenant, resource.id, **q) for q in queries] == before
    finally:
        runtime.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pending_events_of_revision_0007_move_to_the_status_callback_topic(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0008: unprocessed `notification` events become `status_callback` events (the topic
    the workers fan out); processed ones and other topics are left; downgrading moves the
    unprocessed ones back."""
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        resource = make_source(runtime.engine, tenant, "id\n1\n")
        now = utc_now()
        with runtime.engine.begin() as conn:
            ids = {
                (topic, processed): outbox.add_event(
                    conn,
                    topic=topic,
                    type="file.delivered",
                    resource_id=resource.id,
                    file_id=None,
                    payload={},
                    now=now,
                )
                for topic in ("notification", "reconciliation")
                for processed in (False, True)
            }
            for (_, processed), event_id in ids.items():
                if processed:
                    outbox.mark_processed(conn, event_id, now)
            _back_to_revision_0008(conn)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0007'")
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades
    try:
        assert _topics(runtime, ids) == {
            ("notification", False): "status_callback",
            ("notification", True): "notification",
            ("reconciliation", False): "reconciliation",
            ("reconciliation", True): "reconciliation",
        }
        with runtime.engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0007")
        assert _topics(runtime, ids) == {key: key[0] for key in ids}
    finally:
        runtime.close()


def _back_to_revision_0008(conn: Any) -> None:
    """Undo 0009: no file layouts, no file warnings."""
    conn.exec_driver_sql("ALTER TABLE files DROP COLUMN warnings")
    conn.exec_driver_sql("ALTER TABLE resources DROP COLUMN file_layout")


def _topics(runtime: Runtime, ids: dict[tuple[str, bool], int]) -> dict[tuple[str, bool], str]:
    with runtime.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT id, topic FROM outbox_events").all()
    topic_of = {row.id: row.topic for row in rows}
    return {key: topic_of[event_id] for key, event_id in ids.items()}
