"""SQLite: a transformation's query never holds the database's one write lock (issue
#14's rule for loads, decision 0013, kept by derived runs: decision 0016). The query
writes into a staging file of its own; only the short moves into the main database
take the lock. Every other writer (accepting notifications, registering webhooks,
renewing leases) would otherwise wait for the query, up to its time limit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Connection

from support.databases import BACKENDS
from support.factories import Tenant, append
from support.sqlite_lock import write_lock_is_free
from support.transformations import FILTER_SQL, make_inputs, output, run, transformation
from tally.runtime import Runtime
from tally.storage import transformation_sql
from tally.storage.blobs import BlobStore

pytestmark = pytest.mark.parametrize("backend", [b for b in BACKENDS if b == "sqlite"])


def database_path(runtime: Runtime) -> str:
    path = runtime.engine.url.database
    assert path is not None
    return path


@pytest.fixture
def lock_free_while_querying(runtime: Runtime, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether another connection could take the write lock at once (no busy wait)
    while each of the runs' queries was about to run, inside its transaction."""
    seen: list[bool] = []
    within_limit = transformation_sql.time_limit

    @contextmanager
    def probing(conn: Connection, seconds: float, *, deadline: float) -> Iterator[None]:
        seen.append(write_lock_is_free(runtime))
        with within_limit(conn, seconds, deadline=deadline):
            yield

    monkeypatch.setattr(transformation_sql, "time_limit", probing)
    return seen


def staging_files(runtime: Runtime) -> list[Path]:
    folder = BlobStore(runtime.settings.blob_dir).staging_dir
    return sorted(folder.glob("derived-*.db")) if folder.is_dir() else []


def test_queries_run_without_the_write_lock(
    runtime: Runtime, tenant: Tenant, lock_free_while_querying: list[bool]
) -> None:
    inputs = make_inputs(runtime.engine, tenant)
    grouped = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(inputs)
    ).id
    filtered = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(inputs, "Filter", FILTER_SQL)
    ).id
    run(runtime, grouped)
    run(runtime, filtered)
    append(
        runtime,
        inputs.settlements,
        "payout_id,currency,amount,status,txn_date\nPO-9,EUR,1.00,settled,2024-02-01\n",
    )
    assert run(runtime, filtered)["incremental"] is True
    assert run(runtime, grouped)["incremental"] is False

    assert lock_free_while_querying == [True, True, True, True]
    assert output(runtime, filtered).row_count == 5  # four settled rows, then the appended one
    assert staging_files(runtime) == []


def test_a_killed_runs_staging_file_is_removed_by_the_next_run(
    runtime: Runtime, tenant: Tenant
) -> None:
    inputs = make_inputs(runtime.engine, tenant)
    derived_id = runtime.transformations.create(
        workspace_id=tenant.workspace_id, body=transformation(inputs)
    ).id
    resource_id = output(runtime, derived_id).id
    folder = BlobStore(runtime.settings.blob_dir).staging_dir
    folder.mkdir(parents=True, exist_ok=True)
    left = folder / f"derived-{resource_id}-0123456789abcdef.db"
    other = folder / f"derived-{resource_id + 1000}-0123456789abcdef.db"
    left.write_bytes(b"a killed run's rows")
    other.write_bytes(b"another output's run, maybe live")

    run(runtime, derived_id)

    assert not left.exists()
    assert other.exists()  # not this output's: left alone
    assert output(runtime, derived_id).row_count == 3
