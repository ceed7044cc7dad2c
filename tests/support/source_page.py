"""What the source page's tests share (HTTP level and browser): a webhook source whose
status callbacks go to a receiver on loopback that refuses until told to accept, and
the state of its deliveries."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from support.servers import serve_app
from tally.core.status_callbacks import DeliveryView
from tally.runtime import Runtime
from tally.services.callback_endpoints import CallbackConfig
from tally.services.webhooks import WebhookDefinition


class Receiver:
    """A customer's endpoint: 500 to every POST while `refusing`, then 200; counts them."""

    def __init__(self) -> None:
        self.refusing = True
        self.calls = 0

    async def _hook(self, request: Request) -> Response:
        await request.body()
        self.calls += 1
        return Response(
            b"down for maintenance" if self.refusing else b"ok", 500 if self.refusing else 200
        )

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/hooks", self._hook, methods=["POST"])])


@contextlib.contextmanager
def running_receiver() -> Iterator[tuple[Receiver, str]]:
    """The receiver, served on loopback, and its hook's URL."""
    receiver = Receiver()
    with serve_app(receiver.app()) as url:
        yield receiver, f"{url}/hooks"


@dataclass(frozen=True)
class WebhookSource:
    id: int
    webhook_id: str


def webhook_source(
    runtime: Runtime, workspace_id: int, name: str, callback_url: str
) -> WebhookSource:
    """A source fed by a webhook whose status callbacks go to `callback_url`."""
    definition = WebhookDefinition(
        name=name, callback=CallbackConfig(url=callback_url, secret=None, events=None)
    )
    registered = runtime.webhooks.register(workspace_id=workspace_id, definition=definition)
    return WebhookSource(registered.source.id, registered.webhook_id)


def deliveries_of(runtime: Runtime, workspace_id: int, source_id: int) -> list[DeliveryView]:
    return runtime.callback_deliveries.list_page(
        workspace_id=workspace_id, source_id=source_id, before_id=None, limit=100
    )
