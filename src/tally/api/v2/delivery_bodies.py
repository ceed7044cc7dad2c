"""The models of a source's status-callback deliveries (GET /api/v2/sources/{id}/
callback-deliveries, POST .../{delivery_id}/retry)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

from tally.core.status_callbacks import DeliveryView


class DeliveryResponse(BaseModel):
    id: int
    event: str = Field(description="The event: file.accepted, file.delivered, ...")
    file_id: int | None
    url: str = Field(description="The endpoint's URL without its query string.")
    state: str = Field(
        description="pending (being tried: `next_attempt_at`), delivered (a 2xx), failed "
        "(the retry schedule ran out), or disabled (the endpoint answered 410 Gone: "
        "nothing more is sent to it)."
    )
    attempts: int
    next_attempt_at: dt.datetime | None = Field(description="When pending: the next try.")
    last_status_code: int | None = Field(
        description="The last attempt's HTTP status; null before one, or when no answer "
        "came (see `last_error`)."
    )
    last_error: str | None
    last_attempted_at: dt.datetime | None
    created_at: dt.datetime
    finished_at: dt.datetime | None

    @classmethod
    def of(cls, view: DeliveryView) -> DeliveryResponse:
        return cls(
            id=view.id,
            event=view.event,
            file_id=view.file_id,
            url=view.url,
            state=view.state,
            attempts=view.attempts,
            next_attempt_at=view.next_attempt_at,
            last_status_code=view.last_status_code,
            last_error=view.last_error,
            last_attempted_at=view.last_attempted_at,
            created_at=view.created_at,
            finished_at=view.finished_at,
        )


class DeliveryListResponse(BaseModel):
    data: list[DeliveryResponse]
    next_before: int | None = Field(
        description="Pass as `before` for the next (older) page; null at the end."
    )
