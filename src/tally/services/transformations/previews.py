"""A definition's preview (issue #12): its columns and first rows within the run's time
limit, nothing kept; and how many run at once (issue #30).

A preview runs a user's SQL for up to TALLY_TRANSFORMATION_TIMEOUT_SECONDS. Each runs on
a thread of this pool with a connection of its own engine, so however many are asked
for, the API's event loop, the threads of its other requests and the connections they
and the notification intake use stay free. At most `total` run at once in a process and
`per_workspace` of one workspace; one more is refused at once, never queued (queued, it
would keep its caller waiting for minutes without a word): TooManyPreviewsError (429)
past the workspace's limit, BusyError (503) past the process's, both with Retry-After.
A stopping process stops its previews (`close`) instead of waiting for their limit.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.errors import BusyError, TooManyPreviewsError
from tally.services.transformations.bodies import parse_definition
from tally.services.transformations.definitions import checked_definition
from tally.services.transformations.runs import RunLimits
from tally.storage import accounts
from tally.storage import transformation_sql as runs_sql
from tally.storage.engine import snapshot_connection

PREVIEW_ROWS = 20
ALL_BUSY = "Every preview slot of the service is in use. Retry later."
STOPPING = "The service is stopping. Retry later."
STOP_RETRY_SECONDS = 0.1  # a stop sent between two statements is sent again this often


@dataclass(frozen=True)
class Preview:
    columns: tuple[Column, ...]
    rows: list[str]  # each row's JSON object text, as a page shows it


class Previews:
    """Previews on threads and connections of their own, within their limits; `submit`
    returns a future of the preview."""

    def __init__(
        self, engine: Engine, limits: RunLimits, *, total: int, per_workspace: int
    ) -> None:
        self._engine = engine
        self._limits = limits
        self._total = total
        self._per_workspace = per_workspace
        self._threads = ThreadPoolExecutor(max_workers=total, thread_name_prefix="tally-preview")
        self._lock = threading.Lock()
        self._running: Counter[int] = Counter()  # by workspace id
        self._futures: set[Future[Preview]] = set()
        self._stops: set[Callable[[], None]] = set()  # one per preview's connection
        self._stopping = False

    def submit(
        self, *, workspace_id: int, body: Any, own_output: int | None = None
    ) -> Future[Preview]:
        """The preview under way, its slot taken; refused at once if none is free.
        `own_output`: the output of the transformation whose edit this previews (its
        name is its own; it and what is computed from it are no input)."""
        with self._lock:
            if self._stopping:
                raise BusyError(STOPPING)
            if self._running[workspace_id] >= self._per_workspace:
                raise TooManyPreviewsError()
            if self._running.total() >= self._total:
                raise BusyError(ALL_BUSY)
            self._running[workspace_id] += 1
            future = self._threads.submit(self._run, workspace_id, body, own_output)
            self._futures.add(future)
        # On completion, or on cancellation before it ran (the caller left).
        future.add_done_callback(partial(self._release, workspace_id))
        return future

    def close(self) -> None:
        """New previews are refused and running ones stopped (each answers BusyError),
        then the threads end."""
        with self._lock:
            self._stopping = True
        while True:
            with self._lock:
                futures, stops = list(self._futures), list(self._stops)
            if not futures:
                break
            for stop in stops:
                stop()
            wait(futures, timeout=STOP_RETRY_SECONDS)
        self._threads.shutdown()

    def _release(self, workspace_id: int, future: Future[Preview]) -> None:
        with self._lock:
            self._running[workspace_id] -= 1
            if not self._running[workspace_id]:
                del self._running[workspace_id]
            self._futures.discard(future)

    def _run(self, workspace_id: int, body: Any, own_output: int | None) -> Preview:
        try:
            return self._preview(workspace_id, body, own_output)
        except Exception as error:
            if self._stopping:  # stopped by `close`, whatever the statement said
                raise BusyError(STOPPING) from error
            raise

    def _preview(self, workspace_id: int, body: Any, own_output: int | None) -> Preview:
        """The query's columns and first rows, within the run's time limit; nothing
        is kept."""
        definition_body = parse_definition(body)
        today = utc_now().date()  # CURRENT_DATE, one for the whole preview
        with snapshot_connection(self._engine) as conn, self._stoppable(conn), conn.begin():
            accounts.get_workspace(conn, workspace_id)
            # the check spends part of the query's time (issue #30)
            deadline = time.monotonic() + self._limits.timeout_seconds
            _, query, _ = checked_definition(
                conn,
                workspace_id,
                definition_body,
                own_output=own_output,
                limits=self._limits.sql,
                deadline=deadline,
            )
            columns = query.as_columns()
            rows = runs_sql.preview_rows(
                conn,
                columns,
                query,
                PREVIEW_ROWS,
                seconds=self._limits.timeout_seconds,
                deadline=deadline,
                today=today,
            )
        return Preview(columns, rows)

    @contextmanager
    def _stoppable(self, conn: Connection) -> Iterator[None]:
        """`close` may stop what `conn` runs meanwhile."""
        stop = runs_sql.interrupter(conn)
        with self._lock:
            self._stops.add(stop)
        try:
            yield
        finally:
            with self._lock:
                self._stops.discard(stop)
