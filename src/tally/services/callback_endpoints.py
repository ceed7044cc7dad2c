"""A source's status-callback endpoint, as its definition gives it: where tally
POSTs its file events, signed with the secret (kept sealed) and filtered by type."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Connection

from tally.core.sealing import SecretBox
from tally.storage import webhooks


@dataclass(frozen=True)
class CallbackConfig:
    url: str
    secret: str | None = None
    events: tuple[str, ...] | None = None


def add_callback_endpoint(
    conn: Connection,
    box: SecretBox,
    resource_id: int,
    config: CallbackConfig | None,
    now: dt.datetime,
) -> None:
    """The source's endpoint, in the caller's transaction; nothing without a config."""
    if config is None:
        return
    webhooks.insert_endpoint(
        conn,
        resource_id=resource_id,
        url=config.url,
        secret_encrypted=box.seal(config.secret) if config.secret else None,
        events=list(config.events) if config.events is not None else None,
        now=now,
    )
