"""Onboarding: accounts, workspaces and API keys. Keys are shown once and kept as hashes."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Engine

from tally.core.accounts import Account, Workspace
from tally.core.clock import utc_now
from tally.core.errors import ApiKeyNotFoundError, DefinitionRejectedError, FieldProblem
from tally.core.ids import hash_secret, new_api_key, secret_matches
from tally.core.names import canonical_origin, name_problem
from tally.storage import accounts
from tally.storage.accounts import KeyRecord
from tally.storage.engine import write_connection


@dataclass(frozen=True)
class IssuedKey:
    key: str  # the only time the clear key exists outside the client
    workspace_id: int


@dataclass(frozen=True)
class KeyInfo:
    """An API key as an operator may see it: its id, a fingerprint and its dates."""

    id: int
    workspace_id: int
    fingerprint: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None

    @classmethod
    def of(cls, record: KeyRecord) -> KeyInfo:
        return cls(
            record.id,
            record.workspace_id,
            key_fingerprint(record.key_hash),
            record.created_at,
            record.revoked_at,
        )


# A fingerprint is the start of the key's SHA-256: enough to tell a workspace's keys
# apart, and nothing that helps to guess a key (it has 256 random bits).
FINGERPRINT_HEX_DIGITS = 12


def key_fingerprint(key_hash: str) -> str:
    return f"sha256:{key_hash[:FINGERPRINT_HEX_DIGITS]}"


def _check_name(field: str, name: str) -> None:
    problem = name_problem(name)
    if problem is not None:
        raise DefinitionRejectedError([FieldProblem(field, problem)])


class AdminService:
    """Onboarding's use cases; each opens its own transaction."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create_account(self, *, name: str, allowed_origins: list[str]) -> Account:
        """A new account; its browser origins are kept in the form browsers send them."""
        problems = []
        if (problem := name_problem(name)) is not None:
            problems.append(FieldProblem("name", problem))
        origins: list[str] = []
        for origin in allowed_origins:
            try:
                canonical = canonical_origin(origin)
            except ValueError as error:
                problems.append(FieldProblem("allowed_origin", str(error)))
                continue
            if canonical not in origins:
                origins.append(canonical)
        if problems:
            raise DefinitionRejectedError(problems)
        with write_connection(self._engine) as conn, conn.begin():
            return accounts.insert_account(conn, name=name, allowed_origins=origins, now=utc_now())

    def create_workspace(self, *, account_id: int, name: str, ingestion_enabled: bool) -> Workspace:
        _check_name("name", name)
        with write_connection(self._engine) as conn, conn.begin():
            accounts.get_account(conn, account_id)
            return accounts.insert_workspace(
                conn,
                account_id=account_id,
                name=name,
                ingestion_enabled=ingestion_enabled,
                now=utc_now(),
            )

    def get_workspace(self, workspace_id: int) -> Workspace:
        with self._engine.connect() as conn:
            return accounts.get_workspace(conn, workspace_id)

    def enable_ingestion(self, workspace_id: int) -> Workspace:
        with write_connection(self._engine) as conn, conn.begin():
            accounts.set_ingestion_enabled(conn, workspace_id, True)
            return accounts.get_workspace(conn, workspace_id)

    def create_api_key(self, workspace_id: int) -> IssuedKey:
        key = new_api_key()
        with write_connection(self._engine) as conn, conn.begin():
            accounts.get_workspace(conn, workspace_id)
            accounts.insert_api_key(
                conn, workspace_id=workspace_id, key_hash=hash_secret(key), now=utc_now()
            )
        return IssuedKey(key, workspace_id)

    def list_api_keys(self, workspace_id: int) -> list[KeyInfo]:
        with self._engine.connect() as conn:
            accounts.get_workspace(conn, workspace_id)
            return [KeyInfo.of(record) for record in accounts.list_keys(conn, workspace_id)]

    def revoke_api_key(self, *, key: str | None = None, key_id: int | None = None) -> KeyInfo:
        """Revoke a key, named by itself or by its id: every later request made with it is
        refused (each request checks its key; no cache keeps a key alive). Revoking a
        revoked key changes nothing and answers as the first time did."""
        with write_connection(self._engine) as conn, conn.begin():
            if key is not None:
                record = accounts.find_key(conn, key_hash=hash_secret(key))
                if record is not None and not secret_matches(key, record.key_hash):
                    record = None
            else:
                record = accounts.find_key(conn, key_id=key_id)
            if record is None:
                raise ApiKeyNotFoundError()
            accounts.revoke_key(conn, record.id, utc_now())
            revoked = accounts.find_key(conn, key_id=record.id)
        assert revoked is not None
        return KeyInfo.of(revoked)

    def create_folder(self, *, workspace_id: int, name: str) -> int:
        _check_name("name", name)
        with write_connection(self._engine) as conn, conn.begin():
            accounts.get_workspace(conn, workspace_id)
            return accounts.insert_folder(conn, workspace_id=workspace_id, name=name, now=utc_now())

    def allowed_origins(self, account_id: int | None) -> frozenset[str]:
        """The origins a browser may call the ingestion API from: one account's, or (for a
        preflight, which carries no account) those of every account."""
        with self._engine.connect() as conn:
            if account_id is None:
                return frozenset(accounts.list_all_allowed_origins(conn))
            found = accounts.find_account(conn, account_id)
        return frozenset(found.allowed_origins) if found else frozenset()
