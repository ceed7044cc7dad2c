"""POST /api/v2/webhooks, POST /api/v2/webhooks/{webhook_id}/feed-source, and POST
/api/v2/sources/{source_id}/webhook/rotate (a new webhook id; decision 0027)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from tally.api.deps import WebhooksDep, runtime_of
from tally.api.errors import json_response, v2_responses
from tally.api.v2.auth import AuthorisedWorkspace, KeyActor
from tally.api.v2.bodies import json_request_body, read_json, validate_body
from tally.api.v2.webhook_bodies import (
    WebhookCreateBody,
    WebhookCreatedResponse,
    WebhookRotatedResponse,
)
from tally.core import errors
from tally.services.callback_endpoints import CallbackConfig
from tally.services.notification_intake import Notification
from tally.services.webhooks import WebhookDefinition

router = APIRouter(prefix="/api/v2", tags=["Ingestion API"])

REGISTRATION_ERRORS = (
    errors.IngestionForbiddenError,
    errors.DefinitionRejectedError,
    errors.InvalidBodyError,
    errors.StorageProvisioningError,
    Exception,  # the spec documents it: "Unexpected error. Retry."
)
NOTIFICATION_ERRORS = (
    errors.InvalidNotificationError,
    errors.WebhookNotFoundError,
    errors.InvalidBodyError,
    errors.IdempotencyKeyReusedError,
    RequestValidationError,
)
# The payload's fields are the webhook's own (file_mapping): any JSON object is one.
NOTIFICATION_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}
MAX_REGISTRATION_BYTES = 1024 * 1024


def _definition(body: WebhookCreateBody) -> WebhookDefinition:
    hook = body.webhook
    callback = None
    if body.notification_config is not None:
        config = body.notification_config
        callback = CallbackConfig(
            url=config.url,
            secret=config.secret,
            events=tuple(config.events) if config.events is not None else None,
        )
    return WebhookDefinition(
        name=body.name,
        folder_id=body.folder_id,
        url_field=hook.file_mapping.url_field,
        filename_field=hook.file_mapping.filename_field,
        credentials=hook.credentials.model_dump() if hook.credentials else None,
        response_status=hook.response_config.status_code,
        response_content_type=hook.response_config.content_type,
        response_body=hook.response_config.body,
        callback=callback,
        encoding=body.encoding,
        columns=body.declared_columns(),
        layout=body.file_layout(),
        mode=body.mode,
    )


@router.post(
    "/webhooks",
    status_code=201,
    summary="Create a source and the webhook that feeds it",
    response_model=WebhookCreatedResponse,
    responses=v2_responses(*REGISTRATION_ERRORS),
    openapi_extra=json_request_body(WebhookCreateBody),
)
async def create_webhook(
    request: Request, workspace: AuthorisedWorkspace, webhooks: WebhooksDep
) -> Response:
    body = validate_body(
        WebhookCreateBody, await read_json(request, max_bytes=MAX_REGISTRATION_BYTES)
    )
    registered = await run_in_threadpool(
        webhooks.register,
        workspace_id=workspace.id,
        definition=_definition(body),
    )
    return json_response(
        {
            "id": registered.source.id,
            "name": registered.source.name,
            "webhook_id": registered.webhook_id,
        },
        status_code=201,
    )


@router.post(
    "/webhooks/{webhook_id}/feed-source",
    summary="Notify that a file is ready (one file per notification)",
    description="No authentication: the webhook_id is the credential. The reply is the "
    "webhook's configured status code, content type and body, sent once the file is "
    "durably queued; it means accepted, not processed. Send an `Idempotency-Key` header "
    "to make retries of one notification queue its file once: a retry (the same file URL "
    "and file name; other payload fields may differ) gets the reply and `X-Tally-File-Id` "
    "of the file first queued; the key sent with another URL or file name is refused "
    "(422, `errors[0].field` `header.Idempotency-Key`), and nothing is queued.",
    responses={
        200: {"description": "The configured reply.", "content": {"*/*": {}}},
        **v2_responses(*NOTIFICATION_ERRORS),
    },
    openapi_extra=NOTIFICATION_BODY,
)
async def feed_webhook(
    request: Request,
    webhook_id: str,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            description="Retries carrying the same key queue the file once; the key "
            "with another file URL or name: 422.",
        ),
    ] = None,
) -> Response:
    runtime = runtime_of(request)
    try:
        payload: Any = await read_json(request, max_bytes=runtime.settings.max_notification_bytes)
    except errors.InvalidBodyError:
        await run_in_threadpool(runtime.webhooks.get_webhook, webhook_id)  # 404 comes first
        raise
    accepted = await asyncio.wrap_future(
        runtime.intake.submit(Notification(webhook_id, payload, idempotency_key))
    )
    return Response(
        orjson.dumps(accepted.body),
        status_code=accepted.status_code,
        media_type=accepted.content_type,
        headers={"X-Tally-File-Id": str(accepted.file_id)},
    )


@router.post(
    "/sources/{source_id}/webhook/rotate",
    response_model=WebhookRotatedResponse,
    summary="Give a source's webhook a new id; the old one stops working",
    description="For a webhook id that leaked, or a routine change of credentials: the "
    "answer holds the new id, this once (only its hash is kept). From then on the old id "
    "answers 404 and files notified with it are not queued; files queued before keep "
    "their course. Authenticated with the workspace's API key, never with the webhook id "
    "(whoever holds a leaked id must not be able to rotate it). 404 for a source of "
    "another workspace, and for a source fed by uploads (it has no webhook).",
    responses=v2_responses(
        errors.IngestionForbiddenError,
        errors.ResourceNotFoundError,
        errors.WebhookNotFoundError,
        RequestValidationError,
    ),
)
async def rotate_webhook(
    workspace: AuthorisedWorkspace,
    webhooks: WebhooksDep,
    actor: KeyActor,
    source_id: Annotated[int, Path()],
) -> WebhookRotatedResponse:
    webhook_id = await run_in_threadpool(
        webhooks.rotate, workspace_id=workspace.id, source_id=source_id, by=actor
    )
    return WebhookRotatedResponse(id=source_id, webhook_id=webhook_id)
