"""`tally admin retract-file` (issue #32 point 7) and `tally admin load --columns` with
`"mode": "replace"`, on both backends: one JSON object each, the file taken back by
`tally admin`, errors as the command's JSON error with exit 1."""

from __future__ import annotations

import json
from pathlib import Path

from test_load_encoding_cli import failed, ok, workspace

from support.factories import run_pipeline
from tally.runtime import Runtime, build_runtime
from tally.services.sources import SourceDefinition
from tally.settings import Settings
from tally.storage import resources
from tally.storage.resources import Resource

__all__ = ["workspace"]  # the fixture, shared with the --encoding tests


def ids_in(runtime: Runtime, source: Resource) -> list[int]:
    with runtime.engine.connect() as conn:
        found = conn.exec_driver_sql(f"SELECT c0 FROM {source.table_name} ORDER BY _row_id")
        return [int(row[0]) for row in found]


def test_retract_file_takes_a_delivered_file_back(settings: Settings, workspace: int) -> None:
    runtime = build_runtime(settings)
    try:
        with runtime.engine.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE workspaces SET ingestion_enabled = true WHERE id = {workspace}"
            )
        source = runtime.sources.create_source(
            workspace_id=workspace, definition=SourceDefinition("statements")
        )
        file_ids = [
            runtime.uploads.queue_upload(
                workspace_id=workspace,
                source_id=source.id,
                staged=runtime.uploads.stage_csv([csv]),
                filename=None,
                idempotency_key=None,
            ).file_id
            for csv in (b"id\n1\n2\n", b"id\n3\n")
        ]
        run_pipeline(runtime)
    finally:
        runtime.close()

    args = ["--workspace", str(workspace), "--source", str(source.id)]
    taken = ok(settings, "admin", "retract-file", *args, "--file", str(file_ids[0]))
    assert {k: taken[k] for k in ("id", "source_id", "status", "rows", "retracted_by")} == {
        "id": file_ids[0],
        "source_id": source.id,
        "status": "retracted",
        "rows": 2,
        "retracted_by": "tally admin",
    }
    assert taken["retracted_at"] is not None
    missing = failed(settings, "admin", "retract-file", *args, "--file", "999")
    assert missing["kind"] == "FileNotFoundInSourceError"
    elsewhere = ["--workspace", "999", "--source", str(source.id), "--file", str(file_ids[1])]
    assert failed(settings, "admin", "retract-file", *elsewhere)["kind"] == "ResourceNotFoundError"
    runtime = build_runtime(settings)
    try:
        assert ids_in(runtime, source) == [3]
    finally:
        runtime.close()


def test_load_with_columns_can_declare_a_snapshot_source(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    csv, columns = tmp_path / "ledger.csv", tmp_path / "columns.json"
    csv.write_text("id,amount\n1,10.00\n")
    declared = [{"name": "id", "type": "integer"}, {"name": "amount", "type": "decimal"}]
    columns.write_text(json.dumps({"columns": declared, "mode": "replace"}))
    load = ["admin", "load", "--workspace", str(workspace), "--name", "ledger"]
    loaded = ok(settings, *load, "--columns", str(columns), str(csv))
    runtime = build_runtime(settings)
    try:
        with runtime.engine.connect() as conn:
            source = resources.get_resource(conn, loaded["id"])
        assert source.mode == "replace"
        csv.write_text("id,amount\n2,20.00\n3,30.00\n")
        runtime.catalogue.append_file(source.id, csv)  # a later file: in place of the rows
        assert ids_in(runtime, source) == [2, 3]
    finally:
        runtime.close()
