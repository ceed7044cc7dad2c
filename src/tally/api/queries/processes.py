"""Queries in a pool of query processes: which process reads a request, how a lost read
is read again, and the filtered counts handed from one process to another.

Each query process runs one query at a time, the shape SQLite is fastest in, with its
own engine and caches (counts, page checkpoints, responses: all keyed by the data
version). Each request goes to the process with the fewest in hand (`pool`); a large
page asked for while the pool is idle is read in parts (`page_parts`). Reads are
read-only, so a request whose query process died is read again on another (the dead one
is replaced), up to once per process, instead of failing. Each query process memoises
the exact counts it computed; this process also keeps each filter set's count (with its
data version) and hands it to whichever query process runs that filter set next, so a
count is paid once, not once per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import Any

from cachetools import LRUCache

from tally.api.compression import BodyGzip, EncodedBody
from tally.api.queries.page_parts import PagePartsReader
from tally.api.queries.pool import QueryProcessLostError, QueryProcessPool
from tally.api.queries.query_process import query_process_pid, read_page, read_rows
from tally.services.data_query import CountHint, DataRequest
from tally.services.workspace_rows import RowsPage, RowsRequest
from tally.settings import Settings

log = logging.getLogger(__name__)
COUNT_HINTS = 4096  # filter sets whose count the API process remembers


class QueryProcesses:
    """Queries in `processes` spawned processes, each with its own engine and caches."""

    def __init__(self, settings: Settings, processes: int) -> None:
        self._processes = processes
        self._pool = QueryProcessPool(settings, processes)
        self._parts = PagePartsReader(
            self._pool,
            processes,
            BodyGzip.from_settings(settings),
            response_cache=settings.response_cache,
        )
        # The filtered counts the query processes paid for, handed to whichever process
        # runs the next request of that filter set (each also memoises its own). Read
        # and written on the event loop only.
        self._counts: LRUCache[tuple[Any, ...], CountHint] = LRUCache(COUNT_HINTS)
        self._running = 0  # requests being read; on the event loop only
        self.pages_read_in_parts = 0  # answered from parts: what tests and operators see

    async def start(self) -> None:
        """Start every query process before the API listens, so no request waits for one."""
        await self._pool.start()
        await asyncio.gather(*(self._pool.call(query_process_pid) for _ in range(self._processes)))
        log.info("query_processes_started", extra={"processes": self._processes})

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody:
        filter_set = (request.workspace_id, request.resource_id, tuple(sorted(request.filters)))
        if (hint := self._counts.get(filter_set)) is not None:
            request = dataclasses.replace(request, count_hint=hint)
        idle = self._running == 0
        self._running += 1
        try:
            if idle and self._parts.suits(request):
                encoded, count = await self._parts.read(request, accept_encoding)
                if count is not None:
                    self._counts[filter_set] = count
                if encoded is not None:
                    self.pages_read_in_parts += 1
                    return encoded
            return await self._read_whole(request, accept_encoding, filter_set)
        finally:
            self._running -= 1

    async def _read_whole(
        self, request: DataRequest, accept_encoding: str | None, filter_set: tuple[Any, ...]
    ) -> EncodedBody:
        read = (read_page, request, accept_encoding)
        # A process killed (e.g. out of memory) loses its calls; a read is read again,
        # on another: as many times as there are processes, which may all have been
        # killed at once (each lost one is out of the pool before its calls fail).
        for _ in range(self._processes):
            with contextlib.suppress(QueryProcessLostError):
                answer: tuple[EncodedBody, CountHint | None] = await self._pool.call(*read)
                break
        else:
            answer = await self._pool.call(*read)
        encoded, count = answer
        if count is not None:
            self._counts[filter_set] = count
        return encoded

    async def read_rows(self, request: RowsRequest) -> RowsPage:
        """The console's page, read in a query process (its caches and column
        snapshots are the Data API's; none is built in the API process)."""
        rows: RowsPage = await self._pool.call(read_rows, request)
        return rows

    def close(self) -> None:
        self._pool.close()
