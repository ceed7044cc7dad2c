"""Standard Webhooks signing: what we sign verifies, and nothing else does."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable

import pytest
from standardwebhooks import Webhook

from support.signatures import WebhookSignatureError, verify_payload
from tally.net.signing import SECRET_PREFIX, new_signing_secret, sign_payload

BODY = b'{"type":"load.completed","data":{"resource_id":7,"rows":1200}}'


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def test_round_trip() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_1", now(), BODY)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-signature"].startswith("v1,")
    verify_payload(secret, headers, BODY)


def test_headers_are_what_the_reference_library_expects() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_ref", now(), BODY)
    # The upstream verifier, not ours, accepts what we produce.
    assert Webhook(secret).verify(BODY, headers) == {
        "type": "load.completed",
        "data": {"resource_id": 7, "rows": 1200},
    }


def test_header_names_are_matched_case_insensitively() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_2", now(), BODY)
    verify_payload(secret, {k.upper(): v for k, v in headers.items()}, BODY)


def test_tampered_body_fails() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_3", now(), BODY)
    with pytest.raises(WebhookSignatureError, match="No matching signature"):
        verify_payload(secret, headers, BODY.replace(b"1200", b"1201"))


def test_tampered_id_fails() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_4", now(), BODY)
    with pytest.raises(WebhookSignatureError):
        verify_payload(secret, {**headers, "webhook-id": "msg_5"}, BODY)


def test_wrong_secret_fails() -> None:
    headers = sign_payload(new_signing_secret(), "msg_6", now(), BODY)
    with pytest.raises(WebhookSignatureError, match="No matching signature"):
        verify_payload(new_signing_secret(), headers, BODY)


def test_old_timestamp_fails() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_7", now() - dt.timedelta(minutes=10), BODY)
    with pytest.raises(WebhookSignatureError, match="too old"):
        verify_payload(secret, headers, BODY)


def test_future_timestamp_fails() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_8", now() + dt.timedelta(minutes=10), BODY)
    with pytest.raises(WebhookSignatureError, match="too new"):
        verify_payload(secret, headers, BODY)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda h: {k: v for k, v in h.items() if k != "webhook-signature"},
        lambda h: {**h, "webhook-signature": "garbage"},
        lambda h: {**h, "webhook-signature": "v1,not-base64!!"},
        lambda h: {**h, "webhook-timestamp": "yesterday"},
    ],
    ids=["missing", "no-comma", "bad-base64", "bad-timestamp"],
)
def test_malformed_headers_fail_with_our_error(
    mangle: Callable[[dict[str, str]], dict[str, str]],
) -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_9", now(), BODY)
    with pytest.raises(WebhookSignatureError):
        verify_payload(secret, mangle(headers), BODY)


def test_body_that_is_not_utf8_does_not_verify() -> None:
    secret = new_signing_secret()
    headers = sign_payload(secret, "msg_10", now(), BODY)
    with pytest.raises(WebhookSignatureError):
        verify_payload(secret, headers, b"\xff\xfe")


def test_new_secret_is_prefixed_base64_of_32_random_bytes() -> None:
    first, second = new_signing_secret(), new_signing_secret()
    assert first.startswith(SECRET_PREFIX)
    assert len(base64.b64decode(first.removeprefix(SECRET_PREFIX), validate=True)) == 32
    assert first != second


def test_secret_without_prefix_is_the_same_key() -> None:
    secret = new_signing_secret()
    bare = secret.removeprefix(SECRET_PREFIX)
    stamp = now()
    assert sign_payload(bare, "m", stamp, BODY) == sign_payload(secret, "m", stamp, BODY)
    verify_payload(bare, sign_payload(secret, "m", stamp, BODY), BODY)


def test_unpadded_secret_is_accepted() -> None:
    secret = SECRET_PREFIX + base64.b64encode(b"k" * 31).decode().rstrip("=")
    verify_payload(secret, sign_payload(secret, "m", now(), BODY), BODY)


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_not base64!", "plain text secret"])
def test_secret_that_is_not_base64_is_rejected(secret: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        sign_payload(secret, "m", now(), BODY)


def test_timestamp_is_converted_to_utc_not_relabelled() -> None:
    secret = new_signing_secret()
    utc = dt.datetime(2030, 1, 2, 12, 0, tzinfo=dt.UTC)
    plus_two = utc.astimezone(dt.timezone(dt.timedelta(hours=2)))
    headers = sign_payload(secret, "m", plus_two, BODY)
    assert headers == sign_payload(secret, "m", utc, BODY)
    assert headers["webhook-timestamp"] == str(int(utc.timestamp()))


def test_naive_timestamp_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        sign_payload(new_signing_secret(), "m", dt.datetime(2030, 1, 1), BODY)  # noqa: DTZ001
