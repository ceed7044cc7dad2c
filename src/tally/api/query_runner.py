"""Where the Data API's queries run: in a pool of query processes (the default), or in
the API process's threads (`TALLY_QUERY_PROCESSES=0`).

Why processes, measured on a 1M-row resource on SQLite (docs/decisions/0006): two
threads of one process answer a 1000-row page *slower* together than one thread alone
(every fetched row hands the GIL over, and SQLite's allocator takes a process-wide
mutex), and uvicorn's API processes share keep-alive connections unevenly (with eight
clients, one process often took all eight while the other idled). A pool fed from one
queue spreads requests, not connections, over every core; each query process runs one
query at a time, the shape SQLite is fastest in. One per CPU of the machine (divided
among `TALLY_WEB_CONCURRENCY` API processes) is the default on both backends: with
PostgreSQL on the same machine, two per CPU measured slower (the server needs the cores
too); with the database elsewhere, raise it.

Reads are read-only, so a request whose query process died is run once more on a new
pool instead of failing. Each query process memoises the exact counts it computed; the
API process also keeps each filter set's count (with its data version) and hands it to
whichever query process runs that filter set next, so a count is paid once, not once
per process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

import anyio
import anyio.to_thread
from cachetools import LRUCache

from tally.api.compression import EncodedBody, encode_json_body
from tally.core.collector import settle_garbage_collector
from tally.runtime import Runtime, build_query_process_service
from tally.services.data_query import CountHint, DataQueryService, DataRequest
from tally.settings import Settings

log = logging.getLogger(__name__)
PARENT_CHECK_SECONDS = 1.0
COUNT_HINTS = 4096  # filter sets whose count the API process remembers


class QueryRunner(Protocol):
    async def start(self) -> None: ...

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody: ...

    def close(self) -> None: ...


def query_runner_for(settings: Settings, runtime: Runtime) -> QueryRunner:
    processes = settings.query_processes
    if processes is None:
        processes = default_query_processes(os.cpu_count() or 1, settings.web_concurrency)
    if processes == 0:
        # SQLite: one query at a time (threads only contend, see above); PostgreSQL:
        # as many as the connection pool holds, since they mostly wait for the server.
        threads = settings.database_pool_size if runtime.backend_name == "postgresql" else 1
        return ThreadQueries(runtime.data_query, settings.gzip_min_bytes, threads)
    return QueryProcesses(settings, processes)


def default_query_processes(cpus: int, api_processes: int) -> int:
    """The machine's CPUs, shared by its API processes; at least one each."""
    return max(1, cpus // api_processes)


class ThreadQueries:
    """Queries in this process, on worker threads, at most `threads` at once."""

    def __init__(self, service: DataQueryService, min_bytes: int, threads: int) -> None:
        self._service = service
        self._min_bytes = min_bytes
        self._limiter = anyio.CapacityLimiter(threads)

    async def start(self) -> None:
        return None

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody:
        encoded, _ = await anyio.to_thread.run_sync(
            _read_encoded, self._service, request, accept_encoding, self._min_bytes,
            limiter=self._limiter,
        )  # fmt: skip
        return encoded

    def close(self) -> None:
        return None


class QueryProcesses:
    """Queries in `processes` spawned processes, each with its own engine and caches."""

    def __init__(self, settings: Settings, processes: int) -> None:
        self._settings = settings
        self._processes = processes
        self._lock = threading.Lock()
        self._pool = self._new_pool()
        # The filtered counts the query processes paid for, handed to whichever process
        # runs the next request of that filter set (each also memoises its own). Read
        # and written on the event loop only.
        self._counts: LRUCache[tuple[Any, ...], CountHint] = LRUCache(COUNT_HINTS)

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=self._processes,
            # Never fork: the API process has threads (intake, worker) and open sockets.
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_query_process,
            initargs=(self._settings,),
        )

    async def start(self) -> None:
        """Start every query process before the API listens, so no request waits for one."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(loop.run_in_executor(self._pool, _query_process_pid) for _ in range(self._processes))
        )
        log.info("query_processes_started", extra={"processes": self._processes})

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody:
        loop = asyncio.get_running_loop()
        pool = self._pool
        filter_set = (request.workspace_id, request.resource_id, tuple(sorted(request.filters)))
        if (hint := self._counts.get(filter_set)) is not None:
            request = dataclasses.replace(request, count_hint=hint)
        work = functools.partial(_read_in_query_process, request, accept_encoding)
        try:
            encoded, count = await loop.run_in_executor(pool, work)
        except BrokenProcessPool:
            log.warning("query_process_lost")  # killed (e.g. out of memory): start afresh
            encoded, count = await loop.run_in_executor(self._replace(pool), work)
        if count is not None:
            self._counts[filter_set] = count
        return encoded

    def _replace(self, broken: ProcessPoolExecutor) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is broken:
                self._pool = self._new_pool()
                broken.shutdown(wait=False, cancel_futures=True)
            return self._pool

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _read_encoded(
    service: DataQueryService, request: DataRequest, accept_encoding: str | None, min_bytes: int
) -> tuple[EncodedBody, CountHint | None]:
    answer = service.answer(request)
    encoded = encode_json_body(answer.body, accept_encoding=accept_encoding, min_bytes=min_bytes)
    return encoded, answer.count


# --- inside a query process ----------------------------------------------------------
# ProcessPoolExecutor hands a process's initializer result to no one: the service it
# builds lives in this module for the process's lifetime.
_process_service: DataQueryService | None = None
_process_min_bytes = 0


def _start_query_process(settings: Settings) -> None:
    global _process_service, _process_min_bytes
    # Ctrl-C reaches the whole process group; the API process stops its pool itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(
        target=_exit_with_parent, args=(os.getppid(),), name="tally-parent-watch", daemon=True
    ).start()
    _process_service = build_query_process_service(settings)
    _process_min_bytes = settings.gzip_min_bytes
    settle_garbage_collector()


def _exit_with_parent(parent: int) -> None:
    """Exit once the API process is gone (killed, e.g. by the OOM killer, it cannot stop
    its pool): the pool's queue never reports it, since every query process holds both
    of its ends, and an orphan would keep its database connection for ever."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _query_process_pid() -> int:
    return os.getpid()


def _read_in_query_process(
    request: DataRequest, accept_encoding: str | None
) -> tuple[EncodedBody, CountHint | None]:
    assert _process_service is not None, "the pool's initializer builds it"
    return _read_encoded(_process_service, request, accept_encoding, _process_min_bytes)
