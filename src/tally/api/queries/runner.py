"""The Data API's query runner: a pool of query processes (the default), or the API
process's own threads (`TALLY_QUERY_PROCESSES=0`), behind one interface.

Why processes, measured on a 1M-row resource on SQLite (docs/decisions/0006): two
threads of one process answer a 1000-row page *slower* together than one thread alone
(every fetched row hands the GIL over, and SQLite's allocator takes a process-wide
mutex), and uvicorn's API processes share keep-alive connections unevenly (with eight
clients, one process often took all eight while the other idled). Handing each request
to a query process spreads requests, not connections, over every core. One query
process per CPU of the machine (divided among `TALLY_WEB_CONCURRENCY` API processes) is
the default on both backends: with PostgreSQL on the same machine, two per CPU measured
slower (the server needs the cores too); with the database elsewhere, raise it.
"""

from __future__ import annotations

import os
from typing import Protocol

import anyio
import anyio.to_thread

from tally.api.compression import BodyGzip, EncodedBody
from tally.api.queries.processes import QueryProcesses
from tally.api.queries.query_process import read_encoded
from tally.runtime import Runtime
from tally.services.data_query import DataQueryService, DataRequest
from tally.services.workspace_rows import RowsPage, RowsRequest
from tally.settings import Settings


class QueryRunner(Protocol):
    async def start(self) -> None: ...

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody: ...

    async def read_rows(self, request: RowsRequest) -> RowsPage: ...

    def close(self) -> None: ...


def query_runner_for(settings: Settings, runtime: Runtime) -> QueryRunner:
    processes = settings.query_processes
    if processes is None:
        processes = default_query_processes(os.cpu_count() or 1, settings.web_concurrency)
    if processes == 0:
        # SQLite: one query at a time (threads only contend, see above); PostgreSQL:
        # as many as the connection pool holds, since they mostly wait for the server.
        threads = settings.database_pool_size if runtime.backend_name == "postgresql" else 1
        return ThreadQueries(runtime.data_query, BodyGzip.from_settings(settings), threads)
    return QueryProcesses(settings, processes)


def default_query_processes(cpus: int, api_processes: int) -> int:
    """The machine's CPUs, shared by its API processes; at least one each."""
    return max(1, cpus // api_processes)


class ThreadQueries:
    """Queries in this process, on worker threads, at most `threads` at once: the read a
    query process runs, and pages always read whole (threads of one process only
    contend, decision 0008)."""

    def __init__(self, service: DataQueryService, gzip: BodyGzip, threads: int) -> None:
        self._service = service
        self._gzip = gzip
        self._limiter = anyio.CapacityLimiter(threads)

    async def start(self) -> None:
        return None

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody:
        encoded, _ = await anyio.to_thread.run_sync(
            read_encoded, self._service, request, accept_encoding, self._gzip,
            limiter=self._limiter,
        )  # fmt: skip
        return encoded

    async def read_rows(self, request: RowsRequest) -> RowsPage:
        return await anyio.to_thread.run_sync(
            self._service.read_rows, request, limiter=self._limiter
        )

    def close(self) -> None:
        return None
