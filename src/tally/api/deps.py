"""The services a route needs, as FastAPI dependencies: each reads the one built at
startup (app.state.runtime, see tally.runtime), so routes never wire anything.

`async def`, though they never wait: FastAPI runs a plain `def` dependency in a thread,
a hop per request that the ingestion path would pay for nothing."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tally.runtime import Runtime
from tally.services.authentication import AuthenticationService
from tally.services.callback_deliveries import CallbackDeliveries
from tally.services.files import FileService
from tally.services.reconciliation.service import ReconciliationService
from tally.services.resource_listing import ResourceListing
from tally.services.sources import SourceService
from tally.services.transformations.previews import Previews
from tally.services.transformations.service import TransformationService
from tally.services.uploads import UploadService
from tally.services.webhooks import WebhookService


def runtime_of(request: Request) -> Runtime:
    """The runtime itself, for the one route that reads it without a dependency: the
    webhook notification, ingestion's hot path, where three dependencies cost 12-19 % of
    the accept rate of one API process (bench/ingest.py, issue #13's before/after)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def _authentication(request: Request) -> AuthenticationService:
    return runtime_of(request).authentication


async def _callback_deliveries(request: Request) -> CallbackDeliveries:
    return runtime_of(request).callback_deliveries


async def _files(request: Request) -> FileService:
    return runtime_of(request).files


async def _listing(request: Request) -> ResourceListing:
    return runtime_of(request).listing


async def _previews(request: Request) -> Previews:
    return runtime_of(request).previews


async def _reconciliations(request: Request) -> ReconciliationService:
    return runtime_of(request).reconciliations


async def _sources(request: Request) -> SourceService:
    return runtime_of(request).sources


async def _transformations(request: Request) -> TransformationService:
    return runtime_of(request).transformations


async def _uploads(request: Request) -> UploadService:
    return runtime_of(request).uploads


async def _webhooks(request: Request) -> WebhookService:
    return runtime_of(request).webhooks


AuthenticationDep = Annotated[AuthenticationService, Depends(_authentication)]
CallbackDeliveriesDep = Annotated[CallbackDeliveries, Depends(_callback_deliveries)]
FilesDep = Annotated[FileService, Depends(_files)]
ListingDep = Annotated[ResourceListing, Depends(_listing)]
PreviewsDep = Annotated[Previews, Depends(_previews)]
ReconciliationsDep = Annotated[ReconciliationService, Depends(_reconciliations)]
SourcesDep = Annotated[SourceService, Depends(_sources)]
TransformationsDep = Annotated[TransformationService, Depends(_transformations)]
UploadsDep = Annotated[UploadService, Depends(_uploads)]
WebhooksDep = Annotated[WebhookService, Depends(_webhooks)]
