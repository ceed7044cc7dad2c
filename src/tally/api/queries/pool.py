"""The API process's side of its query processes: spawned processes, each answering
the calls written to its own socket, in order.

Written here instead of using ProcessPoolExecutor because of what the executor costs
the API process: a feeder thread pickles each call into a shared queue and a manager
thread collects results and wakes the event loop, three thread hand-offs per request
on a process whose event loop is its bottleneck (measured without them: PostgreSQL Q1
598 -> 648 req/s, SQLite 854 -> 975; docs/decisions/0006, its later note). Here the
event loop writes a call to the socket of the process with the fewest calls in hand
(calls may queue there, so a process never waits for the event loop between two calls)
and a task per process reads the answers. A process that dies is replaced; the calls
it had fail with QueryProcessLostError. The other side is `query_process.serve_calls`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import multiprocessing
import os
import pickle
import socket
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from tally.api.queries.query_process import FRAME_BYTES, frame, serve_calls
from tally.settings import Settings

log = logging.getLogger(__name__)


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


class QueryProcessPool:
    """`processes` spawned query processes, each with its own socket and listener task."""

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
            target=serve_calls,
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
        worker.writer.write(frame((function, args)))
        ok, value = await answer
        if ok:
            return value
        raise value

    async def _listen(self, worker: _QueryProcess) -> None:
        """Hand each answer to the call it belongs to (a cancelled caller's is dropped);
        when the process is gone, fail its calls and start another in its place."""
        try:
            while True:
                size = int.from_bytes(await worker.reader.readexactly(FRAME_BYTES), "little")
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
