"""A status callback's delivery state (one delivery per event and endpoint), and a
delivery as the source page and the API list it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum


class DeliveryStatus(StrEnum):
    """Pending until a 2xx (delivered), a 410 or the retry schedule's end (failed); the
    values are stored as they are."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class DeliveryState(StrEnum):
    """A delivery as people see it: its status, or `disabled` when its endpoint answered
    410 Gone (nothing more is sent to it)."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    DISABLED = "disabled"


@dataclass(frozen=True)
class DeliveryView:
    """One status callback's delivery to one endpoint, with its last attempt: what the
    source page and GET /api/v2/sources/{id}/callback-deliveries show."""

    id: int
    event: str  # file.accepted, file.delivered, ...
    file_id: int | None
    url: str  # the endpoint's URL without its query string
    state: DeliveryState
    attempts: int
    next_attempt_at: dt.datetime | None  # when pending: the next try
    last_status_code: int | None
    last_error: str | None
    last_attempted_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None
