"""An invite URL in a log line (uvicorn's access log names every path) shows no token."""

from __future__ import annotations

import logging

from tally.core.ids import new_invite_token
from tally.core.redaction import SecretRedactor, redact_secrets


def test_an_invite_token_is_blanked_in_log_lines() -> None:
    token = new_invite_token()
    assert token.startswith("inv_")
    line = f'127.0.0.1 - "GET /console/invite/{token} HTTP/1.1" 200'
    assert redact_secrets(line) == '127.0.0.1 - "GET /console/invite/inv_[redacted] HTTP/1.1" 200'
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, "%s %s", ("GET", f"/console/invite/{token}"), None
    )
    SecretRedactor().filter(record)
    assert token not in record.getMessage()
