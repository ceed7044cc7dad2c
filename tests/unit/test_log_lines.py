"""A log line names its event and then its context (the `extra` of the call), with any
key or webhook id blanked there as in the message."""

from __future__ import annotations

import logging

from tally.core.log_lines import ContextFormatter, context_of

FORMAT = "%(levelname)s %(name)s %(message)s"


def line(message: str, **extra: object) -> str:
    record = logging.getLogger("tally.test").makeRecord(
        "tally.test", logging.INFO, __file__, 1, message, None, None, extra=extra
    )
    return ContextFormatter(FORMAT).format(record)


def test_the_context_follows_the_event_in_the_order_given() -> None:
    assert line("file_delivered", file_id=7, rows=10_000) == (
        "INFO tally.test file_delivered file_id=7 rows=10000"
    )


def test_values_that_are_not_one_word_are_json() -> None:
    text = line("derived_run_finished", published=True, why="a b", seconds={"query": 0.25})
    assert text.endswith('published=true why="a b" seconds={"query":0.25}')


def test_a_line_without_context_is_the_message_alone() -> None:
    assert line("worker_stopped") == "INFO tally.test worker_stopped"


def test_secrets_in_the_context_are_blanked() -> None:
    text = line("request_crashed", path="/api/v2/webhooks/whk_SeCrEt0123456789/feed-source")
    assert "SeCrEt0123456789" not in text
    assert "path=/api/v2/webhooks/whk_[redacted]/feed-source" in text


def test_standard_attributes_are_not_context() -> None:
    record = logging.getLogger("tally.test").makeRecord(
        "tally.test", logging.INFO, __file__, 1, "m %s", ("x",), None, extra={"file_id": 1}
    )
    record.getMessage()
    assert context_of(record) == {"file_id": 1}
