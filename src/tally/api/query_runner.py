"""Where the Data API's queries run: in a pool of query processes (the default), or in
the API process's threads (`TALLY_QUERY_PROCESSES=0`).

Why processes, measured on a 1M-row resource on SQLite (docs/decisions/0006): two
threads of one process answer a 1000-row page *slower* together than one thread alone
(every fetched row hands the GIL over, and SQLite's allocator takes a process-wide
mutex), and uvicorn's API processes share keep-alive connections unevenly (with eight
clients, one process often took all eight while the other idled). The pool hands each
request to the query process with the fewest in hand, so requests, not connections,
are spread over every core; each query process runs one query at a time, the shape
SQLite is fastest in. One per CPU of the machine (divided
among `TALLY_WEB_CONCURRENCY` API processes) is the default on both backends: with
PostgreSQL on the same machine, two per CPU measured slower (the server needs the cores
too); with the database elsewhere, raise it.

A large page asked for while every query process is idle (an export fetching pages one
after another) is read in parts, one per query process, at once, and stitched together
if every part read the same data version (decision 0008): a 10,000-row page on SQLite
took 39 ms whole, 23-25 ms in two parts.

Reads are read-only, so a request whose query process died is read again on another
(the dead one is replaced), up to once per process, instead of failing. Each query
process memoises the exact counts it computed; the API process also keeps each filter
set's count (with its data version) and hands it to whichever query process runs that
filter set next, so a count is paid once, not once per process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

import anyio
import anyio.to_thread
from cachetools import LRUCache

from tally.api.compression import (
    DeflatedPiece,
    EncodedBody,
    accepts_gzip,
    deflate_piece,
    encode_json_body,
    gzip_of_pieces,
    inflate_piece,
)
from tally.core.collector import settle_garbage_collector
from tally.core.filters import cap_page_size
from tally.runtime import Runtime, build_query_process_service
from tally.services.data_query import (
    CountHint,
    DataAnswer,
    DataQueryService,
    DataRequest,
    PagePart,
    StitchedPage,
    stitch_parts,
)
from tally.settings import Settings

log = logging.getLogger(__name__)
PARENT_CHECK_SECONDS = 1.0
COUNT_HINTS = 4096  # filter sets whose count the API process remembers
# Pages of fewer rows are read whole: a part costs ~0.7 ms of hand-over, and rendering
# 1,000 rows costs about 2 ms.
SPLIT_MIN_ROWS = 4000


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


class QueryProcessLostError(Exception):
    """The query process running a call died (killed, out of memory) before answering."""


@dataclass
class _QueryProcess:
    process: BaseProcess
    sock: socket.socket  # the API process's end of the pair
    writer: asyncio.StreamWriter  # calls go out in order ...
    reader: asyncio.StreamReader  # ... and their answers come back in the same order
    pending: collections.deque[asyncio.Future[tuple[bool, Any]]]
    listening: asyncio.Task[None] | None = None


_FRAME = 8  # length prefix of every message, little-endian


class _QueryProcessPool:
    """Spawned query processes, each answering its calls in order over its own socket.

    Written here instead of using ProcessPoolExecutor because of what the executor costs
    the API process: a feeder thread pickles each call into a shared queue and a manager
    thread collects results and wakes the event loop, three thread hand-offs per
    request on a process whose event loop is its bottleneck (measured without them:
    PostgreSQL Q1 598 -> 648 req/s, SQLite 854 -> 975; decision 0006). Here the event loop
    writes a call to the socket of the process with the fewest calls in hand (calls may
    queue there, so a process never waits for the event loop between two calls) and a
    task per process reads the answers. A process that dies is replaced; the calls it
    had fail with QueryProcessLostError.
    """

    def __init__(self, settings: Settings, processes: int) -> None:
        self._settings = settings
        self._size = processes
        self._processes: list[_QueryProcess] = []
        self._started = asyncio.Event()  # set whenever a process joins the pool

    async def start(self) -> None:
        for _ in range(self._size):
            await self._add()

    async def _add(self) -> None:
        self._processes.append(await self._spawn())
        self._started.set()

    async def _spawn(self) -> _QueryProcess:
        # Never fork: the API process has threads (intake, worker) and open sockets.
        context = multiprocessing.get_context("spawn")
        ours, theirs = socket.socketpair()
        process = context.Process(
            target=_serve_calls,
            args=(theirs, self._settings, os.getpid()),
            name="tally-query",
            daemon=True,
        )
        process.start()
        theirs.close()
        reader, writer = await asyncio.open_unix_connection(sock=ours, limit=2**20)
        worker = _QueryProcess(process, ours, writer, reader, collections.deque())
        worker.listening = asyncio.create_task(self._listen(worker))
        return worker

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)` in a query process; its exception is raised here."""
        # A killed process is seen here (waitpid) before its listener sees its socket
        # close; when every one is gone, wait for the listeners to start new ones.
        while not (alive := [w for w in self._processes if w.process.is_alive()]):
            self._started.clear()
            await self._started.wait()
        worker = min(alive, key=lambda w: len(w.pending))
        answer = asyncio.get_running_loop().create_future()
        worker.pending.append(answer)
        message = pickle.dumps((function, args), protocol=pickle.HIGHEST_PROTOCOL)
        worker.writer.write(len(message).to_bytes(_FRAME, "little") + message)
        ok, value = await answer
        if ok:
            return value
        raise value

    async def _listen(self, worker: _QueryProcess) -> None:
        """Hand each answer to the call it belongs to (a cancelled caller's is dropped);
        when the process is gone, fail its calls and start another in its place."""
        try:
            while True:
                size = int.from_bytes(await worker.reader.readexactly(_FRAME), "little")
                # a socketpair between this process and its own child: nobody else writes
                answer = pickle.loads(await worker.reader.readexactly(size))  # noqa: S301
                waiting = worker.pending.popleft()
                if not waiting.done():
                    waiting.set_result(answer)
        except (asyncio.IncompleteReadError, OSError):
            pass
        log.warning("query_process_lost", extra={"pid": worker.process.pid})
        self._processes.remove(worker)  # first: no call may join its queue from here on
        worker.writer.close()
        worker.process.join(timeout=0)
        while worker.pending:
            waiting = worker.pending.popleft()
            if not waiting.done():
                waiting.set_result((False, QueryProcessLostError()))
        await self._add()

    def close(self) -> None:
        """Each process sees its socket close, finishes its calls and exits. The socket
        is shut down at once: the transport would close it only on the event loop's next
        turn, and this waits for the processes without giving it one."""
        processes, self._processes = self._processes, []
        for worker in processes:
            if worker.listening is not None:
                worker.listening.cancel()
            with contextlib.suppress(OSError):
                worker.sock.shutdown(socket.SHUT_RDWR)
            worker.writer.close()
        for worker in processes:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.kill()


class QueryProcesses:
    """Queries in `processes` spawned processes, each with its own engine and caches."""

    def __init__(self, settings: Settings, processes: int) -> None:
        self._settings = settings
        self._processes = processes
        self._pool = _QueryProcessPool(settings, processes)
        # The filtered counts the query processes paid for, handed to whichever process
        # runs the next request of that filter set (each also memoises its own). Read
        # and written on the event loop only.
        self._counts: LRUCache[tuple[Any, ...], CountHint] = LRUCache(COUNT_HINTS)
        self._running = 0  # requests being read; on the event loop only
        self.pages_read_in_parts = 0  # answered from parts: what tests and operators see

    async def start(self) -> None:
        """Start every query process before the API listens, so no request waits for one."""
        await self._pool.start()
        await asyncio.gather(*(self._pool.call(_query_process_pid) for _ in range(self._processes)))
        log.info("query_processes_started", extra={"processes": self._processes})

    async def read(self, request: DataRequest, accept_encoding: str | None) -> EncodedBody:
        filter_set = (request.workspace_id, request.resource_id, tuple(sorted(request.filters)))
        if (hint := self._counts.get(filter_set)) is not None:
            request = dataclasses.replace(request, count_hint=hint)
        idle = self._running == 0
        self._running += 1
        try:
            if idle and self._processes > 1 and cap_page_size(request.page_size) >= SPLIT_MIN_ROWS:
                encoded = await self._read_in_parts(request, accept_encoding, filter_set)
                if encoded is not None:
                    return encoded
            return await self._read_whole(request, accept_encoding, filter_set)
        finally:
            self._running -= 1

    async def _read_whole(
        self, request: DataRequest, accept_encoding: str | None, filter_set: tuple[Any, ...]
    ) -> EncodedBody:
        read = (_read_in_query_process, request, accept_encoding)
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

    async def _read_in_parts(
        self, request: DataRequest, accept_encoding: str | None, filter_set: tuple[Any, ...]
    ) -> EncodedBody | None:
        """The page read in one part per query process, all at once; None when it must
        be read whole after all (the parts saw different data versions, or a process
        was lost). Each part is authorised on its own, as any request is."""
        size = cap_page_size(request.page_size)
        bounds = [size * i // self._processes for i in range(self._processes + 1)]
        # Each part compresses its own rows (gzip accepted): the API process then only
        # joins them, and the parts hand over a sixth of the bytes. Their plain rows
        # come too only when the stitched page goes to the response cache.
        deflate = accepts_gzip(accept_encoding)
        keep_rows = self._settings.response_cache or not deflate
        outcomes = await asyncio.gather(
            *(
                self._pool.call(
                    _read_part_in_query_process,
                    dataclasses.replace(request, rows=(start, stop)),
                    deflate,
                    keep_rows,
                )
                for start, stop in itertools.pairwise(bounds)
            ),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, QueryProcessLostError):
                return None
            if isinstance(outcome, BaseException):
                raise outcome  # every part has the same request: the same error
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        answers = [answer for answer, _piece in done]
        if (count := answers[0].count) is not None:
            self._counts[filter_set] = count
        min_bytes = self._settings.gzip_min_bytes
        cached = next((a.body for a in answers if a.part is None), None)
        if cached is not None:  # a part found the whole page in its response cache
            self.pages_read_in_parts += 1
            return encode_json_body(cached, accept_encoding=accept_encoding, min_bytes=min_bytes)
        parts = [a.part for a in answers if a.part is not None]
        stitched = stitch_parts(parts)
        if stitched is None:
            return None
        self.pages_read_in_parts += 1
        pieces = [piece for _answer, piece in done if piece is not None]
        if keep_rows:
            body = stitched.body([p.rows for p in parts])
            if self._settings.response_cache:
                await self._remember(parts[0], body)
        else:
            body = b""
        if deflate and len(pieces) == len(parts):
            size = len(stitched.start) + len(stitched.end) + sum(p.size for p in pieces)
            if size > min_bytes:
                return EncodedBody(_gzip_stitched(stitched, pieces), gzipped=True)
            body = body or stitched.body([inflate_piece(p) for p in pieces])
        return encode_json_body(body, accept_encoding=accept_encoding, min_bytes=min_bytes)

    async def _remember(self, part: PagePart, body: bytes) -> None:
        """Put the stitched page in a query process's response cache before answering,
        so the next identical request finds it (one of its parts runs there)."""
        with contextlib.suppress(QueryProcessLostError):  # then it is only read again
            await self._pool.call(_remember_in_query_process, part.cache_key, body)

    def close(self) -> None:
        self._pool.close()


def _read_encoded(
    service: DataQueryService, request: DataRequest, accept_encoding: str | None, min_bytes: int
) -> tuple[EncodedBody, CountHint | None]:
    answer = service.answer(request)
    encoded = encode_json_body(answer.body, accept_encoding=accept_encoding, min_bytes=min_bytes)
    return encoded, answer.count


# --- inside a query process ----------------------------------------------------------
# The service a query process builds lives in this module for the process's lifetime.
_process_service: DataQueryService | None = None
_process_min_bytes = 0


def _start_query_process(settings: Settings, api_process: int) -> None:
    global _process_service, _process_min_bytes
    # Ctrl-C reaches the whole process group; the API process stops its pool itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The API process's id comes from it, not from os.getppid() here: a query process
    # still starting when the API process was killed already has another parent.
    threading.Thread(
        target=_exit_with_parent, args=(api_process,), name="tally-parent-watch", daemon=True
    ).start()
    _process_service = build_query_process_service(settings)
    _process_min_bytes = settings.gzip_min_bytes
    settle_garbage_collector()


def _serve_calls(sock: socket.socket, settings: Settings, api_process: int) -> None:
    """A query process's life: start, then answer the calls that come on `sock`, one at
    a time, until the API process closes it."""
    _start_query_process(settings, api_process)
    with sock:
        while (message := _receive_blocking(sock)) is not None:
            function, args = pickle.loads(message)  # noqa: S301 - from our API process only
            try:
                answer = pickle.dumps((True, function(*args)), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # the caller raises it
                answer = pickle.dumps((False, error), protocol=pickle.HIGHEST_PROTOCOL)
            sock.sendall(len(answer).to_bytes(_FRAME, "little") + answer)


def _receive_blocking(sock: socket.socket) -> bytes | None:
    """The next message, or None when the API process closed the socket."""
    header = _read_exactly(sock, _FRAME)
    if header is None:
        return None
    return _read_exactly(sock, int.from_bytes(header, "little"))


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            return None
        got += n
    return bytes(buffer)


def _exit_with_parent(parent: int) -> None:
    """Exit once the API process is gone (killed, e.g. by the OOM killer, it cannot stop
    its pool): the pool's queue never reports it, since every query process holds both
    of its ends, and an orphan would keep its database connection for ever."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _query_process_pid() -> int:
    return os.getpid()


def _remember_in_query_process(key: tuple[Any, ...], body: bytes) -> None:
    assert _process_service is not None, "the pool's initializer builds it"
    _process_service.remember(key, body)


def _read_part_in_query_process(
    request: DataRequest, deflate: bool, keep_rows: bool
) -> tuple[DataAnswer, DeflatedPiece | None]:
    """A part of a page: its answer, and its rows compressed when `deflate`; the plain
    rows are left out of the answer unless `keep_rows`."""
    assert _process_service is not None, "the pool's initializer builds it"
    answer = _process_service.answer(request)
    if answer.part is None or not deflate:
        return answer, None
    piece = deflate_piece(answer.part.rows)
    if not keep_rows:
        answer = dataclasses.replace(answer, part=dataclasses.replace(answer.part, rows=b""))
    return answer, piece


def _gzip_stitched(stitched: StitchedPage, pieces: list[DeflatedPiece]) -> bytes:
    """The stitched page as one gzip member: the envelope's ends and the commas are
    compressed here (a few bytes), the parts' rows were compressed where they were read."""
    comma = deflate_piece(b",")
    middle: list[DeflatedPiece] = []
    for n, index in enumerate(stitched.filled):
        middle += [comma, pieces[index]] if n else [pieces[index]]
    return gzip_of_pieces([deflate_piece(stitched.start), *middle, deflate_piece(stitched.end)])


def _read_in_query_process(
    request: DataRequest, accept_encoding: str | None
) -> tuple[EncodedBody, CountHint | None]:
    assert _process_service is not None, "the pool's initializer builds it"
    return _read_encoded(_process_service, request, accept_encoding, _process_min_bytes)
