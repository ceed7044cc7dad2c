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
