"""Standard Webhooks signatures, so receivers can prove a delivery came from us, unaltered.

A thin wrapper over the `standardwebhooks` package that pins down what the package
leaves loose:

* Secrets are ``whsec_`` + base64 of the key. A secret *without* the prefix is taken to
  be the same base64 key body (as the other Standard Webhooks libraries do), never raw
  text. Both forms are decoded strictly: a secret that is not valid base64, or that
  decodes to nothing, is a `ValueError` (the package would silently skip bad characters
  and sign with a different key than the operator thinks).
* Timestamps must be timezone-aware and are converted to UTC (the package would relabel
  any aware time as UTC without converting it).
* Bodies are bytes and must be UTF-8 (the scheme signs text); payloads are JSON.

tally only signs; receivers verify (the tests' verifier is tests/support/signatures.py).
"""

from __future__ import annotations

import base64
import binascii
import math
import secrets
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"  # noqa: S105 - the scheme's marker, not a secret
_SECRET_BYTES = 32


def new_signing_secret() -> str:
    """A fresh secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_SECRET_BYTES)).decode("ascii")


def sign_payload(secret: str, msg_id: str, timestamp: datetime, body: bytes) -> dict[str, str]:
    """The ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature`` headers for a body."""
    if timestamp.tzinfo is None or timestamp.utcoffset() is None:
        raise ValueError("timestamp must be timezone-aware")
    utc = timestamp.astimezone(UTC)
    signature = Webhook(signing_key(secret)).sign(msg_id=msg_id, timestamp=utc, data=_text(body))
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(math.floor(utc.timestamp())),
        "webhook-signature": signature,
    }


def signing_key(secret: str) -> bytes:
    """The HMAC key a secret stands for: the base64 body, with or without ``whsec_``."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("signing secret is not base64 (expected 'whsec_' + base64)") from None
    if not key:
        raise ValueError("signing secret is empty")
    return key


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("webhook body must be UTF-8") from None
