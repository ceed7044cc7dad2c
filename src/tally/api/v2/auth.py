"""The /api/v2 authentication: a dependency that runs before the body is read.

Every failure is the same 403 (spec part 5), decided before any validation of the body,
so a bad body with bad credentials is a 403, never a 422. The three headers are required;
a request without one is that same 403 (api/errors.py), not a 422 naming it. Ingestion
routes also need the workspace's ingestion switch; reconciliation routes do not.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.concurrency import run_in_threadpool

from tally.api.deps import AuthenticationDep
from tally.core.accounts import Workspace
from tally.core.errors import IngestionForbiddenError
from tally.services.authentication import api_key_actor


async def _workspace(
    authentication: AuthenticationDep,
    x_api_key: Annotated[str, Header(alias="x-api-key", description="Workspace-level API key.")],
    x_svc_workspace: Annotated[str, Header(alias="x-svc-workspace", description="Workspace id.")],
    x_svc_account: Annotated[
        str,
        Header(alias="x-svc-account", description="Id of the account the workspace belongs to."),
    ],
) -> Workspace:
    """The three headers, checked; the switch is the route's dependency's to require."""
    return await run_in_threadpool(
        authentication.authenticate,
        api_key=x_api_key,
        workspace=x_svc_workspace,
        account=x_svc_account,
        require_ingestion=False,
    )


async def ingestion_workspace(workspace: Annotated[Workspace, Depends(_workspace)]) -> Workspace:
    if not workspace.ingestion_enabled:
        raise IngestionForbiddenError()
    return workspace


# An ingestion route's workspace: the headers, and the workspace's ingestion switch.
AuthorisedWorkspace = Annotated[Workspace, Depends(ingestion_workspace)]
# A reconciliation route's workspace: the headers only (issue #11).
KeyedWorkspace = Annotated[Workspace, Depends(_workspace)]


async def _key_actor(request: Request) -> str:
    """Who a change made with this request's key is recorded as: the key's fingerprint,
    never the key (the route's workspace dependency has checked the key)."""
    return api_key_actor(request.headers.get("x-api-key", ""))


# The actor of a change made through the API: a reconciliation action, a file taken back.
KeyActor = Annotated[str, Depends(_key_actor)]
