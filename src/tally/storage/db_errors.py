"""Driver exceptions -> tally errors, in one place, so no driver error reaches a service."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from tally.core.errors import QueryNotApplicableError, StorageError


@contextmanager
def translated_errors() -> Iterator[None]:
    """Around reads: an unreachable database is transient (503); a statement the
    database refuses is the spec's 'could not be applied' (400)."""
    try:
        yield
    except exc.DBAPIError as error:
        if error.connection_invalidated or isinstance(
            error, exc.OperationalError | exc.InterfaceError
        ):
            raise StorageError() from error
        if isinstance(error, exc.DataError | exc.ProgrammingError):
            raise QueryNotApplicableError(str(error.orig)) from error
        raise
    except exc.TimeoutError as error:  # the connection pool is exhausted
        raise StorageError() from error


FAILURE_SUMMARY_CHARS = 300


def failure_summary(error: BaseException) -> str:
    """One line naming an unexpected failure: a driver error's own message (the
    database's words, not the statement), else the exception's type and message."""
    if isinstance(error, exc.DBAPIError) and error.orig is not None:
        text = str(error.orig)
    else:
        text = f"{type(error).__name__}: {error}"
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return first[:FAILURE_SUMMARY_CHARS]
