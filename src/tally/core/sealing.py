"""Encryption of stored secrets (download credentials, signing secrets, pre-signed URLs).

Fernet (AES-128-CBC + HMAC-SHA256, from `cryptography`) with a key from configuration:
a leaked database alone reveals no credential.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken

from tally.core.errors import TallyError


class SealError(TallyError):
    """A stored secret could not be decrypted: was TALLY_SECRET_KEY changed?"""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    @staticmethod
    def new_key() -> bytes:
        return Fernet.generate_key()

    def seal(self, clear: str) -> str:
        return self._fernet.encrypt(clear.encode("utf-8")).decode("ascii")

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode("utf-8")
        except InvalidToken as exc:
            raise SealError() from exc
