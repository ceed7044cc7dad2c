"""Test data made through the services: tenants (account, workspace, key) and sources."""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from tally.services import admin, catalogue
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
    account = admin.create_account(
        engine, name=f"account {n}", allowed_origins=allowed_origins or []
    )
    workspace = admin.create_workspace(
        engine, account_id=account.id, name=f"workspace {n}", ingestion_enabled=ingestion
    )
    return Tenant(account.id, workspace.id, admin.create_api_key(engine, workspace.id).key)


def write_file(content: str | bytes, suffix: str = ".csv") -> Path:
    handle = tempfile.NamedTemporaryFile(delete=False, suffix=suffix)  # noqa: SIM115
    with handle:
        handle.write(content.encode() if isinstance(content, str) else content)
    return Path(handle.name)


def make_source(
    engine: Engine, tenant: Tenant, content: str | bytes, name: str | None = None
) -> Resource:
    """A source loaded from CSV text (or raw bytes: gzip, Latin-1, ...)."""
    path = write_file(content)
    try:
        result = catalogue.create_source_from_file(
            engine,
            workspace_id=tenant.workspace_id,
            name=name or f"source {next(_numbers)}",
            path=path,
        )
    finally:
        path.unlink()
    return result.resource
