"""A source's status-callback deliveries for people and integrations: listed newest
first, and "Retry now", which makes a pending or failed delivery due at once (the
worker's `CallbackSender` sends it; nothing is sent from a request)."""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.errors import ConflictError, DeliveryNotFoundError, FieldProblem
from tally.core.status_callbacks import DeliveryState, DeliveryView
from tally.services.catalogue import get_owned_source
from tally.storage import callback_deliveries
from tally.storage.engine import write_connection
from tally.storage.schema import is_storable_id

log = logging.getLogger("tally.callbacks")


class CallbackDeliveries:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list_page(
        self,
        *,
        workspace_id: int,
        source_id: int,
        before_id: int | None,
        limit: int,
        file_id: int | None = None,
    ) -> list[DeliveryView]:
        """Newest first, below `before_id`, about `file_id` when given; 404 unless this
        workspace owns the source."""
        with self._engine.connect() as conn:
            get_owned_source(conn, workspace_id, source_id)
            return callback_deliveries.list_source_deliveries(
                conn, source_id, limit=limit, before_id=before_id, file_id=file_id
            )

    def retry_now(
        self, *, workspace_id: int, source_id: int, delivery_id: int, by: str
    ) -> DeliveryView:
        """Due at once, pending again. A failed delivery gets one more attempt (the retry
        schedule is spent: another failure ends it failed again). A delivery being sent
        right now is answered as it is. 409 for a delivered one, or one whose endpoint
        answered 410 Gone (disabled: nothing more is sent to it)."""
        with write_connection(self._engine) as conn, conn.begin():
            get_owned_source(conn, workspace_id, source_id)
            delivery = _delivery_of(conn, source_id, delivery_id)
            if delivery.state in (DeliveryState.DELIVERED, DeliveryState.DISABLED):
                why = (
                    "it was delivered"
                    if delivery.state is DeliveryState.DELIVERED
                    else "its endpoint answered 410 Gone and is disabled"
                )
                raise ConflictError(
                    [FieldProblem("delivery_id", f"delivery {delivery_id} is not retried: {why}")]
                )
            if callback_deliveries.make_due(conn, delivery_id, utc_now()):
                log.info(
                    "callback_retry_requested",
                    extra={"delivery_id": delivery_id, "source_id": source_id, "by": by},
                )
            return _delivery_of(conn, source_id, delivery_id)


def _delivery_of(conn: Connection, source_id: int, delivery_id: int) -> DeliveryView:
    found = (
        callback_deliveries.find_source_delivery(conn, source_id, delivery_id)
        if is_storable_id(delivery_id)
        else None
    )
    if found is None:
        raise DeliveryNotFoundError()
    return found
