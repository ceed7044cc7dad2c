"""Accounts and workspaces as the services hand them out (frozen, read from storage)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Account:
    id: int
    name: str
    allowed_origins: tuple[str, ...]


@dataclass(frozen=True)
class Workspace:
    id: int
    account_id: int
    name: str
    ingestion_enabled: bool

    @classmethod
    def from_row(cls, row: Any) -> Workspace:
        return cls(row.id, row.account_id, row.name, bool(row.ingestion_enabled))
