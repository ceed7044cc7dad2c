"""Who may call the ingestion API: an API key, its workspace and its account, together."""

from __future__ import annotations

from sqlalchemy import Engine

from tally.core.accounts import Workspace
from tally.core.errors import IngestionForbiddenError
from tally.core.ids import hash_secret, secret_matches
from tally.services.admin import key_fingerprint
from tally.storage import accounts


class AuthenticationService:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def authenticate(
        self,
        *,
        api_key: str | None,
        workspace: str | None,
        account: str | None,
        require_ingestion: bool = True,
    ) -> Workspace:
        """All three headers together, or the same 403 whatever was wrong (spec part 5).
        Ingestion needs the workspace's switch; reconciliations (issue #11) do not."""
        try:
            workspace_id, account_id = int(workspace or ""), int(account or "")
        except ValueError:
            raise IngestionForbiddenError() from None
        if not api_key:
            raise IngestionForbiddenError()
        with self._engine.connect() as conn:
            stored = accounts.find_active_key(conn, hash_secret(api_key))
            found = accounts.find_workspace(conn, workspace_id)
        if (
            stored is None
            or not secret_matches(api_key, stored.key_hash)
            or found is None
            or stored.workspace_id != workspace_id
            or (require_ingestion and not found.ingestion_enabled)
            or found.account_id != account_id
        ):
            raise IngestionForbiddenError()
        return found


def api_key_actor(api_key: str) -> str:
    """An API key as the actor of what it did: its fingerprint, never the key."""
    return f"api key {key_fingerprint(hash_secret(api_key))}"
