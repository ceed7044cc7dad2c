"""SQLite: a reconciliation's whole run writes its plan (one row per output row) into
scratch files of its own, not into the main database (derived_plans.write_and_fill):
writing it takes no write lock of the main database, puts nothing through its log, and
deleting the files replaces freeing its pages one by one. A second thread writes the
plan part by part while the output fills from the parts written; whatever fails, both
end and no part is left."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect

from support.factories import Tenant
from support.reconciliation_runs import (
    bank_and_ledger,
    definition_json,
    make_reconciliation,
    output_resource,
    output_rows,
)
from support.sqlite_lock import write_lock_is_free
from tally.core.errors import RunFailedError
from tally.runtime import Runtime
from tally.storage.blobs import BlobStore
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import plans as derived_plans

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


def test_the_plan_is_written_aside_without_the_write_lock(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    record = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    seen: dict[str, Any] = {}
    write_plan = derived_plans.write_plan

    def probed(rows: Iterable[Sequence[Any]]) -> Iterator[Sequence[Any]]:
        for n, row in enumerate(rows):
            if n == 1:  # inside the plan's transaction, its table already written to
                seen["lock free"] = write_lock_is_free(runtime)
                seen["files"] = list(BlobStore(runtime.settings.blob_dir).staging_dir.iterdir())
            yield row

    def writing(*args: Any, **kwargs: Any) -> int:
        engine, resource_id, layout, rows, guard = args
        return write_plan(engine, resource_id, layout, probed(rows), guard, **kwargs)

    monkeypatch.setattr(derived_plans, "write_plan", writing)
    runtime.derived.run_now(record.id, kind="reconciliation", worker="test")

    assert seen["lock free"] is True
    assert [Path(f).name.startswith(f"derived-{record.resource_id}-") for f in seen["files"]] == [
        True
    ]
    assert list(BlobStore(runtime.settings.blob_dir).staging_dir.iterdir()) == []
    with runtime.engine.connect() as conn:
        tables = inspect(conn).get_table_names()
    assert derived_outputs.plan_table(record.resource_id) not in tables
    assert output_resource(runtime, record).row_count == 6  # 2 pairs, a split in 2 rows, 2 alone


def staging_files(runtime: Runtime) -> list[str]:
    folder = BlobStore(runtime.settings.blob_dir).staging_dir
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_the_plan_written_in_parts_fills_the_output_the_one_part_does(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    whole = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    runtime.derived.run_now(whole.id, kind="reconciliation", worker="test")
    parts: list[list[int]] = []
    write_plan = derived_plans.write_plan

    def writing(*args: Any, **kwargs: Any) -> int:
        engine, resource_id, layout, rows, guard = args
        parts.append([row[0] for row in rows])  # the plan's row ids (seq)
        return write_plan(engine, resource_id, layout, rows, guard, **kwargs)

    monkeypatch.setattr(derived_plans, "write_plan", writing)
    monkeypatch.setattr(derived_plans, "PART_ROWS", 4)
    monkeypatch.setattr(derived_outputs, "BATCH_ROWS", 3)  # a part filled in two batches
    monkeypatch.setattr(derived_plans, "BATCH_ROWS", 3)
    split = make_reconciliation(
        runtime.engine, tenant, definition_json(left, right, name="In parts")
    )
    runtime.derived.run_now(split.id, kind="reconciliation", worker="test")
    assert parts == [[1, 2, 3, 4], [5, 6]]
    assert output_rows(runtime, tenant, split) == output_rows(runtime, tenant, whole)
    assert staging_files(runtime) == []


def test_a_fill_that_fails_ends_the_plan_writer_and_leaves_no_part(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    record = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    monkeypatch.setattr(derived_plans, "PART_ROWS", 1)  # six parts: the writer is ahead
    yield_to_writers = derived_plans.yield_to_writers
    filled: list[int] = []

    def failing(conn: Any) -> None:  # each part's one batch starts here
        if filled:
            raise OSError("the disk is full")
        filled.append(1)
        yield_to_writers(conn)

    monkeypatch.setattr(derived_plans, "yield_to_writers", failing)
    with pytest.raises(RunFailedError, match="the disk is full"):
        runtime.derived.run_now(record.id, kind="reconciliation", worker="test")
    assert staging_files(runtime) == []
    with runtime.engine.connect() as conn:
        tables = inspect(conn).get_table_names()
    assert derived_outputs.next_table(record.resource_id) in tables  # the next run clears it


def test_a_plan_writer_that_fails_fails_the_run_and_leaves_no_part(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    left, right = bank_and_ledger(runtime, tenant)
    record = make_reconciliation(runtime.engine, tenant, definition_json(left, right))
    monkeypatch.setattr(derived_plans, "PART_ROWS", 2)
    write_plan = derived_plans.write_plan
    written: list[int] = []

    def failing(*args: Any, **kwargs: Any) -> int:
        if written:
            raise OSError("the disk is full")
        written.append(write_plan(*args, **kwargs))
        return written[-1]

    monkeypatch.setattr(derived_plans, "write_plan", failing)
    with pytest.raises(RunFailedError, match="the disk is full"):
        runtime.derived.run_now(record.id, kind="reconciliation", worker="test")
    assert written == [2]
    assert staging_files(runtime) == []
