"""Onboarding: accounts, workspaces and API keys. Keys are shown once and kept as hashes."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.ids import hash_secret, new_api_key
from tally.storage import accounts
from tally.storage.accounts import Account, Workspace
from tally.storage.engine import write_connection


@dataclass(frozen=True)
class IssuedKey:
    key: str  # the only time the clear key exists outside the client
    workspace_id: int


def create_account(engine: Engine, *, name: str, allowed_origins: list[str]) -> Account:
    with write_connection(engine) as conn, conn.begin():
        return accounts.insert_account(
            conn, name=name, allowed_origins=allowed_origins, now=utc_now()
        )


def create_workspace(
    engine: Engine, *, account_id: int, name: str, ingestion_enabled: bool
) -> Workspace:
    with write_connection(engine) as conn, conn.begin():
        accounts.get_account(conn, account_id)
        return accounts.insert_workspace(
            conn,
            account_id=account_id,
            name=name,
            ingestion_enabled=ingestion_enabled,
            now=utc_now(),
        )


def enable_ingestion(engine: Engine, workspace_id: int) -> Workspace:
    with write_connection(engine) as conn, conn.begin():
        accounts.set_ingestion_enabled(conn, workspace_id, True)
        return accounts.get_workspace(conn, workspace_id)


def create_api_key(engine: Engine, workspace_id: int) -> IssuedKey:
    key = new_api_key()
    with write_connection(engine) as conn, conn.begin():
        accounts.get_workspace(conn, workspace_id)
        accounts.insert_api_key(
            conn, workspace_id=workspace_id, key_hash=hash_secret(key), now=utc_now()
        )
    return IssuedKey(key, workspace_id)


def create_folder(engine: Engine, *, workspace_id: int, name: str) -> int:
    with write_connection(engine) as conn, conn.begin():
        accounts.get_workspace(conn, workspace_id)
        return accounts.insert_folder(conn, workspace_id=workspace_id, name=name, now=utc_now())


def allowed_origins(engine: Engine, account_id: int | None) -> frozenset[str]:
    """The origins a browser may call the ingestion API from: one account's, or (for a
    preflight, which carries no account) those of every account."""
    with engine.connect() as conn:
        if account_id is None:
            return frozenset(accounts.list_all_allowed_origins(conn))
        found = accounts.find_account(conn, account_id)
    return frozenset(found.allowed_origins) if found else frozenset()
