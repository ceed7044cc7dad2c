"""The secrets tally hands out (API keys, webhook ids, invite tokens) never reach a log
line: a logging filter blanks them in messages, their arguments and tracebacks. Pure: no
handler here."""

from __future__ import annotations

import logging
import re

from tally.core.ids import API_KEY_PREFIX, INVITE_PREFIX, WEBHOOK_ID_PREFIX

REDACTED = "[redacted]"
_SECRET = re.compile(rf"({API_KEY_PREFIX}|{WEBHOOK_ID_PREFIX}|{INVITE_PREFIX})[A-Za-z0-9_-]+")
_TRACEBACKS = logging.Formatter()


def redact_secrets(text: str) -> str:
    """`text` with every key, webhook id and invite token replaced by its prefix and
    `[redacted]`."""
    return _SECRET.sub(rf"\1{REDACTED}", text)


class SecretRedactor(logging.Filter):
    """Installed on uvicorn's loggers (its access log names the path, webhook id and
    all) and on the handlers of the root logger (every other record reaching them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _redacted(arg) for key, arg in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


def _redacted(arg: object) -> object:
    return redact_secrets(arg) if isinstance(arg, str) else arg
