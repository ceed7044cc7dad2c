"""Test data made through the services: tenants (account, workspace, key), sources, and
the ledger CSV the Data API tests read; queued files delivered in-process as a worker
delivers them (`run_pipeline`); reads of a source through the query service.

Tests get a tenant from the `tenant` / `ingestion_tenant` fixtures (conftest.py); the
functions here are for tests that need more than one, or different settings.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from tally.runtime import Runtime
from tally.services.admin import AdminService
from tally.services.catalogue import SourceCatalogue
from tally.services.data_query import DataRequest
from tally.storage.resources import Resource
from tally.storage.schema import resources as resources_table

_numbers = itertools.count(1)
MAX_PIPELINE_STEPS = 50

# Insertion order is the file order; `id` is only a label. Ties: amount 10.00 (rows 1
# and 4), memo 'alpha' (rows 1 and 6). Missing: amount row 5, txn_date row 3,
# posted_at row 4, flag row 4, memo row 3.
LEDGER_CSV = (
    "id,amount,txn_date,posted_at,flag,memo,bank.amount,Amount\n"
    "1,10.00,2024-01-05,2024-01-05T10:00:00Z,true,alpha,1,100\n"
    "2,10.01,2024-01-06,2024-01-06T11:30:00Z,false,beta,2,200\n"
    "3,-5.50,,2024-01-07T09:00:00Z,true,,3,300\n"
    "4,10.00,2024-02-01,,,gamma,4,400\n"
    "5,,2024-02-15,2024-02-15T23:59:59Z,false,delta,5,500\n"
    "6,20.25,2024-03-01,2024-03-01T00:00:00Z,true,alpha,6,600\n"
)
LEDGER_COLUMNS = ["id", "amount", "txn_date", "posted_at", "flag", "memo", "bank.amount", "Amount"]


@dataclass(frozen=True)
class Tenant:
    account_id: int
    workspace_id: int
    key: str

    @property
    def headers(self) -> dict[str, str]:
        """The Data API's (/api/v1) credentials."""
        return {"X-API-Key": self.key, "workspace_id": str(self.workspace_id)}

    @property
    def v2_headers(self) -> dict[str, str]:
        """The ingestion API's (/api/v2) credentials."""
        return {
            "x-api-key": self.key,
            "x-svc-workspace": str(self.workspace_id),
            "x-svc-account": str(self.account_id),
        }


def make_tenant(
    engine: Engine, *, ingestion: bool = False, allowed_origins: list[str] | None = None
) -> Tenant:
    n = next(_numbers)
    admin = AdminService(engine)
    account = admin.create_account(name=f"account {n}", allowed_origins=allowed_origins or [])
    workspace = admin.create_workspace(
        account_id=account.id, name=f"workspace {n}", ingestion_enabled=ingestion
    )
    return Tenant(account.id, workspace.id, admin.create_api_key(workspace.id).key)


def write_file(content: str | bytes, suffix: str = ".csv") -> Path:
    handle = tempfile.NamedTemporaryFile(delete=False, suffix=suffix)  # noqa: SIM115
    with handle:
        handle.write(content.encode() if isinstance(content, str) else content)
    return Path(handle.name)


CHUNKED_HEADER = "id,day,amount,memo"
CHUNKED_EARLY = 45_000  # lines before `chunked_csv`'s late ones: past the first chunk


def chunked_csv(*late: str) -> str:
    """About three of pass 1's 1 MiB chunks (services/loader/chunks.py) of lines like the
    benchmark's (growing ids, dates, two-digit amounts, now and then a quoted comma),
    `late` ones after the first chunk."""
    lines = [CHUNKED_HEADER]
    for n in range(1, 2 * CHUNKED_EARLY + 1):
        if n == CHUNKED_EARLY + 1:
            lines.extend(late)
        memo = f'"Shop {n % 7}, Ltd"' if n % 150 == 0 else f"shop {n % 13}"
        lines.append(f"{n},2024-0{1 + n % 9}-1{n % 10},{n % 997}.{n % 100:02d},{memo}")
    return "\n".join(lines) + "\n"


def make_source(
    engine: Engine,
    tenant: Tenant,
    content: str | bytes,
    name: str | None = None,
    declared: dict[str, Any] | None = None,
) -> Resource:
    """A source loaded from CSV text (or raw bytes: gzip, Latin-1, ...); `declared`: the
    body of `tally admin load --columns` (None: columns inferred)."""
    path, catalogue = write_file(content), SourceCatalogue(engine)
    try:
        result = catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id,
            name=name or f"source {next(_numbers)}",
            path=path,
            declared=declared,
        )
    finally:
        path.unlink()
    catalogue.finish_resource(result.resource.id)  # as a worker does after a load
    return result.resource


def append(runtime: Runtime, source_id: int, content: str) -> None:
    """CSV text appended to a source: a new data version of it, as a delivery makes."""
    path = write_file(content)
    try:
        runtime.catalogue.append_file(source_id, path)
    finally:
        path.unlink()


def run_pipeline(runtime: Runtime) -> int:
    """Claim and process files until none is due, in this process, as a worker does; how
    many were processed."""
    for step in range(MAX_PIPELINE_STEPS):
        file = runtime.delivery.claim_file(worker="test-worker")
        if file is None:
            return step
        runtime.delivery.process_file(file, worker="test-worker")
    raise AssertionError("the queue never emptied")


def read_body(
    runtime: Runtime,
    tenant: Tenant,
    resource_id: int,
    *,
    filters: Sequence[tuple[str, str]] = (),
    fields: str | None = None,
    ordering: str | None = None,
    page: int = 1,
    page_size: int = 1000,
) -> bytes:
    """A Data API body, read through the service as the API reads it (no HTTP)."""
    request = DataRequest(
        resource_id,
        tenant.workspace_id,
        tenant.key,
        list(filters),
        fields,
        ordering,
        page,
        page_size,
    )
    return runtime.data_query.read(request)


def read_envelope(runtime: Runtime, tenant: Tenant, resource_id: int, **query: Any) -> Any:
    """`read_body` parsed; JSON numbers with a '.' as exact Decimals."""
    return json.loads(read_body(runtime, tenant, resource_id, **query), parse_float=Decimal)


def read_data(
    runtime: Runtime, tenant: Tenant, resource_id: int, **query: Any
) -> list[dict[str, Any]]:
    """The rows of one page (see `read_envelope`)."""
    rows: list[dict[str, Any]] = read_envelope(runtime, tenant, resource_id, **query)["data"]
    return rows


def count_resources(runtime: Runtime, tenant: Tenant) -> int:
    """How many resources the tenant's workspace holds (a failed load must add none)."""
    with runtime.engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(resources_table)
                .where(resources_table.c.workspace_id == tenant.workspace_id)
            ).scalar_one()
        )
