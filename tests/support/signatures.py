"""The receiver's side of Standard Webhooks, for tests: tally signs, receivers verify.

`verify_payload` checks what net/signing.py signs, with the same reading of a secret
(`signing_key`: base64, with or without `whsec_`)."""

from __future__ import annotations

from collections.abc import Mapping

from standardwebhooks import Webhook, WebhookVerificationError

from tally.net.signing import signing_key


class WebhookSignatureError(Exception):
    """The webhook signature does not verify."""


def verify_payload(secret: str, headers: Mapping[str, str], body: bytes) -> None:
    """Check a delivery's headers against its body; raise `WebhookSignatureError` if wrong.

    Header names are matched case-insensitively. Timestamps more than five minutes away
    from now are refused (the package's tolerance), which stops replays of old deliveries.
    """
    webhook = Webhook(signing_key(secret))
    try:
        webhook.verify(body.decode("utf-8"), dict(headers), json_parse=False)
    except (WebhookVerificationError, ValueError) as exc:
        # ValueError covers a body that is not UTF-8 and malformed signature headers.
        raise WebhookSignatureError(f"webhook signature does not verify: {exc}") from None
