"""Webhook registration: a source and the webhook that feeds it, finding a webhook by
the id its callers hold (only its hash is stored), and a new id for a source's webhook
(rotation: the old id stops working at once)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import WebhookNotFoundError
from tally.core.formats import PLAIN_LAYOUT, FileLayout
from tally.core.ids import hash_secret, new_webhook_id
from tally.core.sealing import SecretBox
from tally.services.callback_endpoints import CallbackConfig, add_callback_endpoint
from tally.services.catalogue import create_source_in, get_owned_source
from tally.storage import webhooks
from tally.storage.engine import write_connection
from tally.storage.resources import APPEND, Resource
from tally.storage.webhooks import WebhookRecord

log = logging.getLogger("tally.ingestion")


@dataclass(frozen=True)
class WebhookDefinition:
    name: str
    folder_id: int | None = None
    url_field: str = "file_url"
    filename_field: str = "filename"
    credentials: dict[str, str] | None = None  # {"type": ..., fields...}
    response_status: int = 200
    response_content_type: str = "application/json"
    response_body: Any = field(default_factory=lambda: {"status": "accepted"})
    callback: CallbackConfig | None = None
    encoding: str = DEFAULT_ENCODING  # of the source's files (decision 0015)
    columns: tuple[Column, ...] | None = None  # None: a placeholder source (the spec's)
    layout: FileLayout = PLAIN_LAYOUT  # lines skipped, declared formats (issue 32)
    mode: str = APPEND  # files append rows, or replace them all (issue 32)


@dataclass(frozen=True)
class RegisteredWebhook:
    source: Resource
    webhook_id: str  # shown once; only its hash is stored


class WebhookService:
    def __init__(self, engine: Engine, box: SecretBox) -> None:
        self._engine = engine
        self._box = box

    def register(self, *, workspace_id: int, definition: WebhookDefinition) -> RegisteredWebhook:
        """The source and its webhook, in one transaction."""
        webhook_id = new_webhook_id()
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            source = create_source_in(
                conn,
                workspace_id=workspace_id,
                name=definition.name,
                folder_id=definition.folder_id,
                encoding=definition.encoding,
                columns=definition.columns,
                layout=definition.layout,
                mode=definition.mode,
            )
            credentials = (
                self._box.seal(orjson.dumps(definition.credentials).decode())
                if definition.credentials
                else None
            )
            webhooks.insert_webhook(
                conn,
                resource_id=source.id,
                workspace_id=workspace_id,
                webhook_id_hash=hash_secret(webhook_id),
                url_field=definition.url_field,
                filename_field=definition.filename_field,
                credentials_encrypted=credentials,
                response_status=definition.response_status,
                response_content_type=definition.response_content_type,
                response_body=definition.response_body,
                now=now,
            )
            add_callback_endpoint(conn, self._box, source.id, definition.callback, now)
        return RegisteredWebhook(source, webhook_id)

    def find_source_webhook(self, *, workspace_id: int, source_id: int) -> WebhookRecord | None:
        """The webhook feeding the source, or None (an upload source); 404 unless this
        workspace owns the source."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            return webhooks.find_webhook_of_source(conn, source_id)

    def rotate(self, *, workspace_id: int, source_id: int, by: str) -> str:
        """A new webhook id for the source's webhook, returned once (only its hash is
        kept); the old id is refused (404) from the commit on; `by` (who asked) is
        logged. WebhookNotFoundError when
        the source has no webhook; ResourceNotFoundError unless the workspace owns it."""
        webhook_id = new_webhook_id()
        with write_connection(self._engine) as conn, conn.begin():
            get_owned_source(conn, workspace_id, source_id)
            webhook = webhooks.find_webhook_of_source(conn, source_id)
            if webhook is None:
                raise WebhookNotFoundError()
            webhooks.set_webhook_id_hash(conn, webhook.id, hash_secret(webhook_id))
        log.info("webhook_rotated", extra={"source_id": source_id, "by": by})
        return webhook_id

    def get_webhook(self, webhook_id: str) -> WebhookRecord:
        """The webhook a caller's id names; WebhookNotFoundError (404) if none."""
        with self._engine.connect() as conn:
            webhook = webhooks.find_webhook_by_hash(conn, hash_secret(webhook_id))
        if webhook is None:
            raise WebhookNotFoundError()
        return webhook
