"""Test data made through the services: tenants (account, workspace, key) and sources."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from tally.runtime import Runtime
from tally.services.admin import AdminService
from tally.services.catalogue import SourceCatalogue
from tally.services.data_query import DataRequest
from tally.storage.resources import Resource

_numbers = itertools.count(1)


@dataclass(frozen=True)
class Tenant:
    account_id: int
    workspace_id: int
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"X-API-Key": self.key, "workspace_id": str(self.workspace_id)}


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


def make_source(
    engine: Engine, tenant: Tenant, content: str | bytes, name: str | None = None
) -> Resource:
    """A source loaded from CSV text (or raw bytes: gzip, Latin-1, ...)."""
    path, catalogue = write_file(content), SourceCatalogue(engine)
    try:
        result = catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id,
            name=name or f"source {next(_numbers)}",
            path=path,
        )
    finally:
        path.unlink()
    catalogue.finish_resource(result.resource.id)  # as a worker does after a load
    return result.resource


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
