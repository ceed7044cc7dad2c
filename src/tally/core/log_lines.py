"""How a log line reads: the event, then its context as `key=value` pairs.

Every log call of tally names its event and passes its context in `extra` (`file_id`,
`derived_id`, a run's `seconds`, ...); `logging.Formatter` prints the message only, so
without this an operator reads `file_delivered` and not which file. Pure: no handler
here. Secrets in the pairs are blanked as in the message (core/redaction.py)."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from tally.core.redaction import redact_secrets

# The attributes every LogRecord has; anything else on a record came from `extra`.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys()
    | {"message", "asctime", "color_message"}  # set by Formatter.format and by uvicorn
)


def context_of(record: logging.LogRecord) -> dict[str, Any]:
    """The record's `extra` pairs, in the order they were given."""
    items = record.__dict__.items()
    return {k: v for k, v in items if k not in _STANDARD and not k.startswith("_")}


def _value(value: Any) -> str:
    """A value as one token: numbers and plain words as they are, anything else as
    JSON (quoted text, objects such as a run's `seconds`)."""
    if isinstance(value, bool) or value is None:
        return orjson.dumps(value).decode()
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and value and all(c.isalnum() or c in "._-:/" for c in value):
        return value
    return orjson.dumps(value, default=str).decode()


class ContextFormatter(logging.Formatter):
    """The standard line, then ` key=value` for each pair of the record's context."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        line = super().formatMessage(record)
        context = context_of(record)
        if not context:
            return line
        pairs = " ".join(f"{key}={_value(value)}" for key, value in context.items())
        return f"{line} {redact_secrets(pairs)}"
