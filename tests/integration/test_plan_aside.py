"""SQLite: a reconciliation's whole run writes its plan (one row per output row) into a
scratch file of its own, not into the main database (derived_plans.plan_aside):
writing it takes no write lock of the main database, puts nothing through its log, and
deleting the file replaces freeing its pages one by one."""

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
)
from support.sqlite_lock import write_lock_is_free
from tally.runtime import Runtime
from tally.storage import derived_outputs, derived_plans
from tally.storage.blobs import BlobStore

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
