"""Secrets tally hands out (API keys, webhook ids, invite tokens, session ids) and how
they are kept: only as hashes.

The secrets are 256 random bits, so a fast keyed-free SHA-256 is the right hash: there
is nothing to brute-force that a slow password hash would protect. Lookups go by the
hash; the final comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

API_KEY_PREFIX = "tly_"
WEBHOOK_ID_PREFIX = "whk_"
INVITE_PREFIX = "inv_"  # in an invite URL's path: the log filter knows it by this
SECRET_BYTES = 32


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(SECRET_BYTES)


def new_webhook_id() -> str:
    return WEBHOOK_ID_PREFIX + secrets.token_urlsafe(SECRET_BYTES)


def new_invite_token() -> str:
    return INVITE_PREFIX + secrets.token_urlsafe(SECRET_BYTES)


def new_session_id() -> str:
    """Only ever in a cookie (never a URL, never a log line): no prefix needed."""
    return secrets.token_urlsafe(SECRET_BYTES)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    """Constant-time check of a presented secret against a stored hash."""
    return hmac.compare_digest(hash_secret(secret), stored_hash)
