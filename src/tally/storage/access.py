"""The one query the Data API's authorisation needs: key, workspace and resource at once.

Each request asks three questions (whose key is this? does the workspace exist? whose
resource is this?). On PostgreSQL every round trip costs more than the answer, so they
travel together; the service still decides in the spec's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from tally.storage.resources import Resource
from tally.storage.schema import api_keys, is_storable_id, resources, workspaces


@dataclass(frozen=True)
class Access:
    key_workspace_id: int | None  # None: no active key with that hash
    key_hash: str | None
    workspace_exists: bool
    resource: Resource | None


def _storable(value: int) -> int:
    return value if is_storable_id(value) else 0  # 0 names nothing


def _access_statement() -> sa.Select[Any]:
    one = sa.select(sa.literal(1).label("one")).subquery("one")
    workspace_exists = (
        sa.select(workspaces.c.id)
        .where(workspaces.c.id == sa.bindparam("workspace_id"))
        .exists()
        .label("workspace_exists")
    )
    return (
        sa.select(
            api_keys.c.workspace_id.label("key_workspace_id"),
            api_keys.c.key_hash,
            workspace_exists,
            *resources.c,
        )
        .select_from(one)
        .outerjoin(
            api_keys,
            sa.and_(
                api_keys.c.key_hash == sa.bindparam("key_hash"), api_keys.c.revoked_at.is_(None)
            ),
        )
        .outerjoin(resources, resources.c.id == sa.bindparam("resource_id"))
    )


# Built once: every request runs it, and building it (and its cache key) cost more than
# running it on SQLite.
_ACCESS = _access_statement()


def read_access(conn: Connection, *, key_hash: str, workspace_id: int, resource_id: int) -> Access:
    params = {
        "key_hash": key_hash,
        "workspace_id": _storable(workspace_id),
        "resource_id": _storable(resource_id),
    }
    row = conn.execute(_ACCESS, params).one()
    return Access(
        key_workspace_id=row.key_workspace_id,
        key_hash=row.key_hash,
        workspace_exists=bool(row.workspace_exists),
        resource=Resource.from_row(row) if row.id is not None else None,
    )
