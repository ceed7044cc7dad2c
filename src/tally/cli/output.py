"""One JSON object on stdout per command; failures too, with a non-zero exit."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import typer

# typer (0.26+) ships its own click, with no public name for the base of its usage errors
from typer._click.exceptions import NoArgsIsHelpError
from typer._click.exceptions import UsageError as CommandLineError

from tally.core.errors import TallyError, UsageError


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


@contextmanager
def reported_usage_errors() -> Iterator[None]:
    """A command line click cannot read is reported like any failure, as README promises
    (one JSON object, exit 1), not as typer's box on stderr with exit 2."""
    with reported_errors():
        try:
            yield
        except NoArgsIsHelpError:
            raise  # a bare `tally` or `tally admin`: the help, as typer prints it
        except CommandLineError as error:
            message = error.format_message().rstrip(".")
            if error.ctx is not None:
                message += f". See '{error.ctx.command_path} --help'"
            raise UsageError(message + ".") from None
