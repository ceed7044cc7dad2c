"""Encryption of stored secrets (download credentials, signing secrets, pre-signed URLs).

Fernet (AES-128-CBC + HMAC-SHA256, from `cryptography`) with a key from configuration:
a leaked database alone reveals no credential. `cryptography` is imported at the first
seal or open, not by every process that builds a box: most `tally admin` commands never
use it, and its import is ~0.02 s of their start-up (issue #36).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from tally.core.errors import TallyError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

KEY_BYTES = 32  # Fernet's key: a signing key and an encryption key, 16 bytes each


class SealError(TallyError):
    """A stored secret could not be decrypted: was TALLY_SECRET_KEY changed?"""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        """A key Fernet would refuse is refused here at once, with Fernet's words (a
        process with a wrong TALLY_SECRET_KEY fails at its start, not at its first
        secret)."""
        try:
            decoded = base64.urlsafe_b64decode(key)
        except binascii.Error:
            decoded = b""
        if len(decoded) != KEY_BYTES:
            raise ValueError("Fernet key must be 32 url-safe base64-encoded bytes.")
        self._key = key
        self._built: Fernet | None = None

    @staticmethod
    def new_key() -> bytes:
        from cryptography.fernet import Fernet

        return Fernet.generate_key()

    def seal(self, clear: str) -> str:
        return self._fernet().encrypt(clear.encode("utf-8")).decode("ascii")

    def open(self, sealed: str) -> str:
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet().decrypt(sealed.encode("ascii")).decode("utf-8")
        except InvalidToken as exc:
            raise SealError() from exc

    def _fernet(self) -> Fernet:
        # Two threads may each build one at first: they are alike, either serves.
        if self._built is None:
            from cryptography.fernet import Fernet

            self._built = Fernet(self._key)
        return self._built
