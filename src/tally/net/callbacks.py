"""Outbound JSON POSTs (status callbacks) to user-configured URLs.

The same SSRF guard as downloads (`fetch.vetted_request`): the resolved address is
vetted, redirects are never followed, and one time budget covers the whole exchange.
An HTTP status is a result, never an exception; messages carry no query string.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from tally.core.errors import FetchError
from tally.net.fetch import AddressPolicy, vetted_request

EXCERPT_CHARS = 1000
_EXCERPT_BYTES = 4 * EXCERPT_CHARS  # enough for 1000 characters of UTF-8


@dataclass(frozen=True)
class CallbackResult:
    """What one POST got: a status and the start of the body, or why there was none."""

    status_code: int | None
    excerpt: str
    error: str | None
    duration_ms: int

    @property
    def is_success(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post_json(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    policy: AddressPolicy,
    timeout_seconds: float,
) -> CallbackResult:
    """POST `body` as application/json to `url`; never raises for a status or a network
    failure (`error` says what happened, without the URL's query string)."""
    started = time.monotonic()
    sent = {"User-Agent": "tally", **headers, "Content-Type": "application/json"}
    try:
        with vetted_request(
            "POST",
            url,
            headers=sent,
            content=body,
            policy=policy,
            timeout_seconds=timeout_seconds,
        ) as response:
            excerpt = _read_excerpt(response.iter_bytes(), started + 2 * timeout_seconds)
            status: int | None = response.status_code
            error = None
    except FetchError as exc:
        status, excerpt, error = None, "", _callback_message(exc.message)
    return CallbackResult(status, excerpt, error, _elapsed_ms(started))


def _read_excerpt(chunks: Iterator[bytes], deadline: float) -> str:
    """The body's first characters; a body that breaks off or is slow only shortens it."""
    collected = bytearray()
    try:
        for chunk in chunks:
            collected.extend(chunk)
            if len(collected) >= _EXCERPT_BYTES or time.monotonic() > deadline:
                break
    except FetchError:
        pass  # the status already arrived: it decides the outcome
    return collected.decode("utf-8", errors="replace")[:EXCERPT_CHARS]


def _callback_message(message: str) -> str:
    """fetch's wording is about downloads; these are callbacks."""
    for download, callback in (
        ("download refused", "callback refused"),
        ("download from", "callback to"),
    ):
        message = message.replace(download, callback, 1)
    return message


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
