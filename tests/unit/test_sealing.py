"""The secret box: what it seals it opens, and a key Fernet would refuse is refused when
the box is built (a process with a wrong TALLY_SECRET_KEY fails at its start), though
Fernet itself is built only at the first seal or open (issue #36)."""

from __future__ import annotations

import base64

import pytest

from tally.core.sealing import SealError, SecretBox


def test_what_is_sealed_opens_with_the_same_key_only() -> None:
    key = SecretBox.new_key()
    sealed = SecretBox(key).seal("user:pässword")
    assert "pässword" not in sealed
    assert SecretBox(key).open(sealed) == "user:pässword"
    with pytest.raises(SealError):
        SecretBox(SecretBox.new_key()).open(sealed)


@pytest.mark.parametrize(
    "key",
    [
        b"",
        b"not base64!",
        base64.urlsafe_b64encode(b"k" * 31),
        base64.urlsafe_b64encode(b"k" * 32)[:-8],
        base64.urlsafe_b64encode(b"k" * 33),
    ],
    ids=["empty", "not base64", "31 bytes", "cut short", "33 bytes"],
)
def test_a_key_fernet_refuses_is_refused_when_the_box_is_built(key: bytes) -> None:
    with pytest.raises(ValueError, match="32 url-safe base64-encoded bytes"):
        SecretBox(key)
