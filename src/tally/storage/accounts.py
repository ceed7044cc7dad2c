"""Queries for accounts, workspaces, API keys and folders. Callers own the transaction."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select, update

from tally.core.accounts import Account, Workspace
from tally.core.clock import as_utc
from tally.core.errors import AccountNotFoundError, WorkspaceNotFoundError
from tally.storage.schema import accounts, api_keys, folders, is_storable_id, workspaces


def insert_account(
    conn: Connection, *, name: str, allowed_origins: list[str], now: dt.datetime
) -> Account:
    account_id = conn.execute(
        insert(accounts)
        .values(name=name, allowed_origins=allowed_origins, created_at=now)
        .returning(accounts.c.id)
    ).scalar_one()
    return Account(account_id, name, tuple(allowed_origins))


def find_account(conn: Connection, account_id: int) -> Account | None:
    if not is_storable_id(account_id):
        return None
    row = conn.execute(select(accounts).where(accounts.c.id == account_id)).first()
    return Account(row.id, row.name, tuple(row.allowed_origins or ())) if row else None


def get_account(conn: Connection, account_id: int) -> Account:
    account = find_account(conn, account_id)
    if account is None:
        raise AccountNotFoundError()
    return account


def insert_workspace(
    conn: Connection, *, account_id: int, name: str, ingestion_enabled: bool, now: dt.datetime
) -> Workspace:
    workspace_id = conn.execute(
        insert(workspaces)
        .values(
            account_id=account_id, name=name, ingestion_enabled=ingestion_enabled, created_at=now
        )
        .returning(workspaces.c.id)
    ).scalar_one()
    return Workspace(workspace_id, account_id, name, ingestion_enabled)


def find_workspace(conn: Connection, workspace_id: int) -> Workspace | None:
    if not is_storable_id(workspace_id):
        return None
    row = conn.execute(select(workspaces).where(workspaces.c.id == workspace_id)).first()
    return Workspace.from_row(row) if row else None


def get_workspace(conn: Connection, workspace_id: int) -> Workspace:
    workspace = find_workspace(conn, workspace_id)
    if workspace is None:
        raise WorkspaceNotFoundError()
    return workspace


def set_ingestion_enabled(conn: Connection, workspace_id: int, enabled: bool) -> None:
    result = conn.execute(
        update(workspaces).where(workspaces.c.id == workspace_id).values(ingestion_enabled=enabled)
    )
    if result.rowcount == 0:
        raise WorkspaceNotFoundError()


def insert_api_key(conn: Connection, *, workspace_id: int, key_hash: str, now: dt.datetime) -> int:
    return int(
        conn.execute(
            insert(api_keys)
            .values(workspace_id=workspace_id, key_hash=key_hash, created_at=now)
            .returning(api_keys.c.id)
        ).scalar_one()
    )


@dataclass(frozen=True)
class StoredKey:
    workspace_id: int
    key_hash: str


def find_active_key(conn: Connection, key_hash: str) -> StoredKey | None:
    row = conn.execute(
        select(api_keys.c.workspace_id, api_keys.c.key_hash).where(
            api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
        )
    ).first()
    return StoredKey(row.workspace_id, row.key_hash) if row else None


@dataclass(frozen=True)
class KeyRecord:
    """What is kept of an API key: never the key, only its hash."""

    id: int
    workspace_id: int
    key_hash: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


def _key_records(conn: Connection, *where: Any) -> list[KeyRecord]:
    rows = conn.execute(
        select(
            api_keys.c.id,
            api_keys.c.workspace_id,
            api_keys.c.key_hash,
            api_keys.c.created_at,
            api_keys.c.revoked_at,
        )
        .where(*where)
        .order_by(api_keys.c.id)
    )
    return [
        KeyRecord(
            row.id,
            row.workspace_id,
            row.key_hash,
            as_utc(row.created_at),
            None if row.revoked_at is None else as_utc(row.revoked_at),
        )
        for row in rows
    ]


def list_keys(conn: Connection, workspace_id: int) -> list[KeyRecord]:
    return _key_records(conn, api_keys.c.workspace_id == workspace_id)


def find_key(
    conn: Connection, *, key_id: int | None = None, key_hash: str | None = None
) -> KeyRecord | None:
    """The key with this id, or with this hash (exactly one of the two)."""
    if key_id is not None:
        if not is_storable_id(key_id):
            return None
        found = _key_records(conn, api_keys.c.id == key_id)
    else:
        found = _key_records(conn, api_keys.c.key_hash == key_hash)
    return found[0] if found else None


def revoke_key(conn: Connection, key_id: int, now: dt.datetime) -> None:
    """Revoked at `now`, unless it already was (the first revocation time is kept)."""
    conn.execute(
        update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )


def insert_folder(conn: Connection, *, workspace_id: int, name: str, now: dt.datetime) -> int:
    return int(
        conn.execute(
            insert(folders)
            .values(workspace_id=workspace_id, name=name, created_at=now)
            .returning(folders.c.id)
        ).scalar_one()
    )


def folder_belongs_to(conn: Connection, folder_id: int, workspace_id: int) -> bool:
    if not is_storable_id(folder_id):
        return False
    row = conn.execute(
        select(folders.c.id).where(
            folders.c.id == folder_id, folders.c.workspace_id == workspace_id
        )
    ).first()
    return row is not None


def list_all_allowed_origins(conn: Connection) -> set[str]:
    origins: set[str] = set()
    for (values,) in conn.execute(select(accounts.c.allowed_origins)):
        origins.update(values or ())
    return origins
