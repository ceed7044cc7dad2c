"""The services a route needs, as FastAPI dependencies: each reads the one built at
startup (app.state.runtime, see runtime.py), so routes never wire anything."""

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


def runtime_of(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _settings(request: Request) -> Settings:
    return runtime_of(request).settings


def _authentication(request: Request) -> AuthenticationService:
    return runtime_of(request).authentication


def _files(request: Request) -> FileService:
    return runtime_of(request).files


def _intake(request: Request) -> NotificationIntake:
    return runtime_of(request).intake


def _sources(request: Request) -> SourceService:
    return runtime_of(request).sources


def _uploads(request: Request) -> UploadService:
    return runtime_of(request).uploads


def _webhooks(request: Request) -> WebhookService:
    return runtime_of(request).webhooks


SettingsDep = Annotated[Settings, Depends(_settings)]
AuthenticationDep = Annotated[AuthenticationService, Depends(_authentication)]
FilesDep = Annotated[FileService, Depends(_files)]
IntakeDep = Annotated[NotificationIntake, Depends(_intake)]
SourcesDep = Annotated[SourceService, Depends(_sources)]
UploadsDep = Annotated[UploadService, Depends(_uploads)]
WebhooksDep = Annotated[WebhookService, Depends(_webhooks)]
