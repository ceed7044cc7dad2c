"""One JSON object on stdout per command; failures too, with a non-zero exit."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import typer

from tally.core.errors import TallyError


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(obj).decode() + "\n")
    sys.stdout.flush()


@contextmanager
def reported_errors() -> Iterator[None]:
    """Expected failures become {"error": ...} and exit 1; crashes keep their traceback."""
    try:
        yield
    except TallyError as error:
        payload: dict[str, Any] = {"error": error.message, "kind": type(error).__name__}
        for attribute in ("line", "column"):
            if getattr(error, attribute, None) is not None:
                payload[attribute] = getattr(error, attribute)
        emit(payload)
        raise typer.Exit(1) from None
