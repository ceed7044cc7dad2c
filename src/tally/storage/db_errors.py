"""Driver exceptions -> tally errors, in one place, so no driver error reaches a service."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc
from sqlalchemy.pool import PoolProxiedConnection, QueuePool

from tally.core.errors import (
    BusyError,
    LoadError,
    QueryNotApplicableError,
    RunFailedError,
    StorageError,
)

log = logging.getLogger("tally.storage")


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
            # The client is told only "try again": the operator needs the cause.
            log.warning("storage_unavailable", extra={"cause": failure_summary(error)})
            raise StorageError() from error
        if isinstance(error, exc.DataError | exc.ProgrammingError):
            raise QueryNotApplicableError(str(error.orig)) from error
        raise


@contextmanager
def failure_as_run_failed() -> Iterator[None]:
    """Around a user's query (a transformation's preview): whatever the database refuses
    is the query's failure, RunFailedError in the database's words; a connection that
    went away is not the query's fault (StorageError, 503)."""
    try:
        yield
    except exc.DBAPIError as error:
        if error.connection_invalidated:
            log.warning("storage_unavailable", extra={"cause": failure_summary(error)})
            raise StorageError() from error
        reason = str(error.orig).strip().splitlines()[0]
        raise RunFailedError(f"the query failed: {reason}") from None


class BusyQueuePool(QueuePool):
    """A QueuePool whose wait for a connection, once past its timeout, is BusyError (503
    with Retry-After) wherever a connection is asked for: SQLAlchemy's TimeoutError
    would reach the API as an unexpected error (500), or fail a worker's job as one."""

    def connect(self) -> PoolProxiedConnection:
        try:
            return super().connect()
        except exc.TimeoutError as error:
            log.warning("pool_exhausted", extra={"cause": failure_summary(error)})
            raise BusyError() from error


# SQLAlchemy names a pool's logger after its class, so this one's sits below `tally` and
# would print each pool's "Pool disposed"/"Pool recreating" at INFO; QueuePool's, below
# `sqlalchemy`, is at WARNING unless asked for: keep it so.
logging.getLogger(f"{BusyQueuePool.__module__}.{BusyQueuePool.__qualname__}").setLevel(
    logging.WARNING
)

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


# What the database refuses as it would every time, whatever the moment: PostgreSQL's
# program limits (class 54: too many columns, a row too big) and data exceptions (22);
# SQLite's error of a statement it will not run ("too many columns on ...") and a string
# or blob too big. A busy, full or unreachable database is none of these.
_REFUSING_SQLSTATE_CLASSES = ("54", "22")
_SQLITE_REFUSALS = (1, 18)  # SQLITE_ERROR, SQLITE_TOOBIG


def refused_by_database(error: BaseException) -> bool:
    if not isinstance(error, exc.DBAPIError) or error.connection_invalidated:
        return False
    sqlstate = getattr(error.orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate[:2] in _REFUSING_SQLSTATE_CLASSES
    code = getattr(error.orig, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _SQLITE_REFUSALS


@contextmanager
def refusal_as_load_error(what: str) -> Iterator[None]:
    """Around building a file's table: a statement the database refuses as it would every
    time fails the file (a LoadError naming `what` in the database's words), where
    another attempt would only fail again; any other failure is raised as it is."""
    try:
        yield
    except exc.DBAPIError as error:
        if not refused_by_database(error):
            raise
        raise LoadError(f"the database refused {what}: {failure_summary(error)}") from error
