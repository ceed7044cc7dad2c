"""A status callback's delivery state (one delivery per event and endpoint)."""

from __future__ import annotations

from enum import StrEnum


class DeliveryStatus(StrEnum):
    """Pending until a 2xx (delivered), a 410 or the retry schedule's end (failed); the
    values are stored as they are."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
