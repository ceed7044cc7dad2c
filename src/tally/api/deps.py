"""The services a route needs, as FastAPI dependencies: each reads the one built at
startup (app.state.runtime, see runtime.py), so routes never wire anything.

`async def`, though they never wait: FastAPI runs a plain `def` dependency in a thread,
a hop per request that the ingestion path would pay for nothing."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tally.runtime import Runtime
from tally.services.authentication import AuthenticationService
from tally.services.files import FileService
from tally.services.notification_intake import NotificationIntake
from tally.services.sources import SourceService
from tally.services.uploads import UploadService
from tally.services.webhooks import WebhookService
from tally.settings import Settings


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def _settings(request: Request) -> Settings:
    return _runtime(request).settings


async def _authentication(request: Request) -> AuthenticationService:
    return _runtime(request).authentication


async def _files(request: Request) -> FileService:
    return _runtime(request).files


async def _intake(request: Request) -> NotificationIntake:
    return _runtime(request).intake


async def _sources(request: Request) -> SourceService:
    return _runtime(request).sources


async def _uploads(request: Request) -> UploadService:
    return _runtime(request).uploads


async def _webhooks(request: Request) -> WebhookService:
    return _runtime(request).webhooks


SettingsDep = Annotated[Settings, Depends(_settings)]
AuthenticationDep = Annotated[AuthenticationService, Depends(_authentication)]
FilesDep = Annotated[FileService, Depends(_files)]
IntakeDep = Annotated[NotificationIntake, Depends(_intake)]
SourcesDep = Annotated[SourceService, Depends(_sources)]
UploadsDep = Annotated[UploadService, Depends(_uploads)]
WebhooksDep = Annotated[WebhookService, Depends(_webhooks)]
