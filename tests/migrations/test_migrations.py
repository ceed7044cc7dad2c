"""`alembic upgrade head` gives exactly storage/schema.py, and data migrations keep every
value."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from support.databases import make_settings
from support.factories import Tenant, append, make_source, make_tenant, read_body, read_data
from support.reconciliation_runs import (
    bank_and_ledger,
    definition_json,
    derived,
    make_reconciliation,
)
from support.reconciliations import definition, make_pair
from tally.core.clock import utc_now
from tally.runtime import Runtime, build_runtime
from tally.settings import Settings
from tally.storage import outbox, resources, status_callbacks
from tally.storage.derived import records as derived_records
from tally.storage.engine import write_connection
from tally.storage.migrate import alembic_config, head_revision, is_at_head, upgrade_database
from tally.storage.resources import Resource
from tally.storage.schema import metadata, outbox_events


def test_migrations_match_the_schema(runtime: Runtime) -> None:
    with runtime.engine.connect() as conn:
        context = MigrationContext.configure(conn)
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_upgrading_twice_changes_nothing(runtime: Runtime) -> None:
    upgrade_database(runtime.engine)  # a second start, a second process
    with runtime.engine.connect() as conn:
        context = MigrationContext.configure(conn)
        assert context.get_current_revision() == "0019"
        assert compare_metadata(context, metadata) == []


def test_the_head_read_from_the_files_text_is_alembics(runtime: Runtime) -> None:
    """A database at `head_revision()` is left to itself without alembic (issue #36): it
    must be the head alembic upgrades to."""
    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert is_at_head(runtime.engine)
    with runtime.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0018'")
    assert not is_at_head(runtime.engine)


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
                "bigint",  # _file_id, from 0010
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
    _back_to_revision_0009(conn, table)
    conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN _json")
    conn.exec_driver_sql("ALTER TABLE resources DROP COLUMN rendered_version")


def _source_of_revision(
    settings: Settings,
    csv: str,
    queries: list[dict[str, Any]],
    revision: str,
    back: Callable[[Any, str], None],
) -> tuple[Tenant, Resource, list[bytes]]:
    """A source loaded from `csv`, its table put `back` into `revision`'s layout and the
    database marked at `revision`; the bodies of `queries` read before."""
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        resource = make_source(runtime.engine, tenant, csv)
        before = [read_body(runtime, tenant, resource.id, **q) for q in queries]
        with runtime.engine.begin() as conn:
            back(conn, resource.table_name)
            if revision >= "0007":  # older revisions' `back` undoes 0011 itself
                _undo_file_layouts(conn)
            conn.exec_driver_sql(f"UPDATE alembic_version SET version_num = '{revision}'")
    finally:
        runtime.close()
    return tenant, resource, before


def _back_to_revision_0009(conn: Any, table: str) -> None:
    """Undo 0010: a source's table without `_file_id` and its index."""
    conn.exec_driver_sql(f"DROP INDEX IF EXISTS ix_{table}__file_id")
    conn.exec_driver_sql(f"ALTER TABLE {table} DROP COLUMN _file_id")


def _back_to_revision_0004(conn: Any) -> None:
    """Undo 0011, 0006 and 0005: no file layouts or warnings, no derived resources, no
    declared encodings."""
    _undo_file_layouts(conn)
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
    tenant, resource, before = _source_of_revision(
        settings,
        'id,amount,at,memo\n1,10.5,2024-01-05T10:30:00+02:00,"a ""quoted"" é"\n'
        "2,-0.01,2024-01-05T23:00:00-01:30,\n3,,,x\n",
        queries,
        "0003",
        _back_to_revision_0003,
    )
    runtime = build_runtime(settings)  # upgrades; and no response cached before
    try:
        assert _rows_without_json(runtime, resource.table_name) == 3
        assert [read_body(runtime, tenant, resource.id, **q) for q in queries] == before
        assert runtime.catalogue.finish_one_unfinished() is True
        assert _rows_without_json(runtime, resource.table_name) == 0
        assert [read_body(runtime, tenant, resource.id, **q) for q in queries] == before
    finally:
        runtime.close()


def _topics(runtime: Runtime) -> list[tuple[str, bool]]:
    """Each outbox event's topic, and whether it is processed, in order."""
    with runtime.engine.connect() as conn:
        rows = conn.execute(
            sa.select(outbox_events.c.topic, outbox_events.c.processed_at.is_not(None))
            .where(outbox_events.c.topic.not_in(("notification", outbox.STATUS_CALLBACK)))
            .order_by(outbox_events.c.id)
        )
        return [(topic, bool(processed)) for topic, processed in rows]


def _add_old_topic_event(runtime: Runtime, resource_id: int) -> int:
    """An `input_changed` event as a process before 0008 writes it."""
    with write_connection(runtime.engine) as conn, conn.begin():
        return outbox.add_event(
            conn,
            topic="reconciliation",
            type="file.delivered",
            resource_id=resource_id,
            file_id=None,
            payload={},
            now=utc_now(),
        )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_pending_input_change_of_revision_0007_still_queues_its_readers(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0008: the topic that wakes the derived runs, `reconciliation` until then, is
    `input_changed`; the pending events are renamed (processed ones are history), and one
    a process of the previous version writes during the upgrade is still read."""
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        bank, ledger = bank_and_ledger(runtime, tenant)
        record = make_reconciliation(runtime.engine, tenant, definition_json(bank, ledger))
        runtime.derived.run_now(record.id, kind="reconciliation", worker="test")
        runtime.derived.queue_changed_inputs()  # whatever the sources' making left
        processed = _add_old_topic_event(runtime, ledger)
        with write_connection(runtime.engine) as conn, conn.begin():
            outbox.mark_processed(conn, processed, utc_now())
        _add_old_topic_event(runtime, bank)
        assert derived(runtime, record.id).state == "idle"
        with runtime.engine.begin() as conn:
            _undo_file_layouts(conn)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0007'")
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades
    try:
        assert _topics(runtime)[-2:] == [("reconciliation", True), ("input_changed", False)]
        assert runtime.derived.queue_changed_inputs()
        assert derived(runtime, record.id).state == "queued"
        runtime.derived.run_now(record.id, kind="reconciliation", worker="test")
        _add_old_topic_event(runtime, ledger)  # by a process not upgraded yet
        assert runtime.derived.queue_changed_inputs()
        assert derived(runtime, record.id).state == "queued"
        assert not any(not processed for _, processed in _topics(runtime))
    finally:
        runtime.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pending_events_of_revision_0008_move_to_the_status_callback_topic(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0009: unprocessed `notification` events become `status_callback` events (the topic
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
                for topic in ("notification", "input_changed")
                for processed in (False, True)
            }
            for (_, processed), event_id in ids.items():
                if processed:
                    outbox.mark_processed(conn, event_id, now)
            _undo_file_layouts(conn)
            conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0008'")
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades
    try:
        assert _topic_of_each(runtime, ids) == {
            ("notification", False): "status_callback",
            ("notification", True): "notification",
            ("input_changed", False): "input_changed",
            ("input_changed", True): "input_changed",
        }
        with runtime.engine.begin() as conn:  # as a process not upgraded yet writes it
            late = outbox.add_event(
                conn,
                topic="notification",
                type="file.delivered",
                resource_id=resource.id,
                file_id=None,
                payload={},
                now=now,
            )
            claimed = status_callbacks.claim_pending_events(conn, limit=10)
        assert [e.id for e in claimed] == [ids[("notification", False)], late]
        ids[("late", False)] = late
        with runtime.engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0008")
        assert _topic_of_each(runtime, ids) == {
            **{key: key[0] for key in ids},
            ("late", False): "notification",
        }
    finally:
        runtime.close()


def _down_to(conn: Any, revision: str) -> None:
    """Alembic's own downgrade to `revision` on `conn` (every test that marks the
    database at an earlier revision runs it down to 0010 at least, so the upgrade adds
    what came after again)."""
    config = alembic_config()
    config.attributes["connection"] = conn
    command.downgrade(config, revision)


def _undo_file_layouts(conn: Any) -> None:
    """Undo 0014 to 0011: back to revision 0010."""
    _down_to(conn, "0010")


def _topic_of_each(
    runtime: Runtime, ids: dict[tuple[str, bool], int]
) -> dict[tuple[str, bool], str]:
    with runtime.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT id, topic FROM outbox_events").all()
    topic_of = {row.id: row.topic for row in rows}
    return {key: topic_of[event_id] for key, event_id in ids.items()}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sources_of_revision_0009_gain_file_ids_null_for_their_rows(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0010: every source's table gains `_file_id`, NULL for the rows already there
    (which file inserted them is not known), and its index; derived outputs gain none.
    Pages read the same bytes; `_row` and `_file_id` answer; a later file's rows carry
    its id."""
    settings = make_settings(request, backend, tmp_path / "home")
    queries: list[dict[str, Any]] = [{}, {"ordering": "-amount"}, {"fields": "id,amount"}]
    tenant, resource, before = _source_of_revision(
        settings, "id,amount\n1,10.5\n2,-0.01\n3,\n", queries, "0009", _back_to_revision_0009
    )
    runtime = build_runtime(settings)  # upgrades; and no response cached before
    try:
        assert [read_body(runtime, tenant, resource.id, **q) for q in queries] == before
        rows = read_data(runtime, tenant, resource.id, fields="id,_row,_file_id")
        assert [(r["id"], r["_file_id"]) for r in rows] == [(1, None), (2, None), (3, None)]
        assert sorted(r["_row"] for r in rows) == [r["_row"] for r in rows]
        with runtime.engine.connect() as conn:
            indexes = sa.inspect(conn).get_indexes(resource.table_name)
        assert f"ix_{resource.table_name}__file_id" in {i["name"] for i in indexes}
        assert read_data(runtime, tenant, resource.id, filters=[("_file_id", "")]) == [
            {"id": 1, "amount": Decimal("10.5")},
            {"id": 2, "amount": Decimal("-0.01")},
            {"id": 3, "amount": None},
        ]
    finally:
        runtime.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_sources_of_revision_0011_take_snapshots_and_never_give_a_row_id_twice(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0012: sources gain `mode` (`append` for those made before) and `removed_version`,
    files the status `retracted`; 0013 (SQLite): a source's table is made again with
    AUTOINCREMENT, keeping its rows, their row ids and its indexes. After it, taking back
    the file with the highest row ids and loading another gives new ids."""
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine, ingestion=True)
        resource = make_source(runtime.engine, tenant, "id,amount\n1,10.5\n2,-0.01\n3,\n")
        queries: list[dict[str, Any]] = [{}, {"ordering": "-amount"}, {"fields": "id,_row"}]
        before = [read_body(runtime, tenant, resource.id, **q) for q in queries]
        with runtime.engine.begin() as conn:
            indexes = _index_names(conn, resource.table_name)
            _down_to(conn, "0011")
            plain = _table_sql(conn, resource.table_name)
    finally:
        runtime.close()
    if backend == "sqlite":
        assert "AUTOINCREMENT" not in plain
    runtime = build_runtime(settings)  # upgrades
    try:
        assert [read_body(runtime, tenant, resource.id, **q) for q in queries] == before
        with runtime.engine.connect() as conn:
            assert resources.get_resource(conn, resource.id).mode == "append"
            assert _index_names(conn, resource.table_name) == indexes
            if backend == "sqlite":
                assert "AUTOINCREMENT" in _table_sql(conn, resource.table_name)
        gone = max(r["_row"] for r in read_data(runtime, tenant, resource.id, fields="_row"))
        with runtime.engine.begin() as conn:  # the highest rows removed, as a retraction does
            conn.exec_driver_sql(f"DELETE FROM {resource.table_name} WHERE _row_id = {gone}")
            conn.exec_driver_sql(
                "INSERT INTO files (resource_id, origin, status, attempts, next_attempt_at, "
                "give_up_at, created_at, updated_at) VALUES "
                f"({resource.id}, 'upload', 'retracted', 1, '2026-11-29', '2026-11-29', "
                "'2026-11-29', '2026-11-29')"
            )
        append(runtime, resource.id, "id,amount\n4,1\n")
        rows = read_data(runtime, tenant, resource.id, fields="id,_row")
        assert rows[-1]["id"] == 4
        assert rows[-1]["_row"] > gone
    finally:
        runtime.close()


def _index_names(conn: Any, table: str) -> list[str]:
    return sorted(i["name"] for i in sa.inspect(conn).get_indexes(table))


def _table_sql(conn: Any, table: str) -> str:
    if conn.dialect.name != "sqlite":
        return ""
    return str(
        conn.exec_driver_sql(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?", (table,)
        ).scalar_one()
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_revision_0018_keeps_history_events_and_its_downgrade_drops_only_them(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0018: the actions' check admits `define` and `run` (events with no rows). Down to
    0017 they go and the check refuses them again; the manual work stays."""
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        pair = make_pair(runtime.engine, tenant)
        made = runtime.reconciliations.create(
            workspace_id=tenant.workspace_id, body=definition(pair)
        )
        runtime.reconciliations.match(
            workspace_id=tenant.workspace_id,
            reconciliation_id=made.id,
            left_rows=[1],
            right_rows=[1],
            note=None,
            actor="alice",
        )
        runtime.reconciliations.queue_run(
            workspace_id=tenant.workspace_id, reconciliation_id=made.id, actor="ada"
        )
        kinds = "SELECT kind FROM reconciliation_actions ORDER BY id"
        with runtime.engine.begin() as conn:
            assert [r[0] for r in conn.exec_driver_sql(kinds)] == ["match", "run"]
            _down_to(conn, "0017")
            assert [r[0] for r in conn.exec_driver_sql(kinds)] == ["match"]
        with pytest.raises(sa.exc.IntegrityError), runtime.engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO reconciliation_actions (derived_id, kind, left_rows, right_rows, "
                f"fingerprint, created_at) VALUES ({made.id}, 'define', '[]', '[]', '', "
                "'2026-11-29')"
            )
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades
    try:
        runtime.reconciliations.queue_run(
            workspace_id=tenant.workspace_id, reconciliation_id=made.id, actor="ada"
        )
        taken = runtime.reconciliations.actions(
            workspace_id=tenant.workspace_id, reconciliation_id=made.id
        )
        assert [(str(a.kind), a.actor) for a in taken] == [("match", "alice"), ("run", "ada")]
    finally:
        runtime.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_revision_0019_adds_the_run_phase_and_its_downgrade_drops_only_it(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """0019: a run under way keeps its phase on its record. Down to 0018 the three columns
    go (the table other tables point at is not copied) and the record stays; up again, a
    run claimed then shows none until its worker writes one."""
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        tenant = make_tenant(runtime.engine)
        record = make_reconciliation(
            runtime.engine, tenant, definition_json(*bank_and_ledger(runtime, tenant))
        )
        with write_connection(runtime.engine) as conn, conn.begin():
            claimed = derived_records.claim_due(
                conn, worker="w", now=utc_now(), lease_seconds=60, phase="starting"
            )
        assert claimed is not None
        assert claimed.run_phase == "starting"
        with runtime.engine.begin() as conn:
            _down_to(conn, "0018")
            names = {c["name"] for c in sa.inspect(conn).get_columns("derived_resources")}
            assert not names & {"run_started_at", "run_phase", "run_phase_since"}
            state = "SELECT state, lease_owner FROM derived_resources"
            assert list(conn.exec_driver_sql(state)) == [("running", "w")]
    finally:
        runtime.close()
    runtime = build_runtime(settings)  # upgrades
    try:
        assert derived(runtime, record.id).run_phase is None
    finally:
        runtime.close()
