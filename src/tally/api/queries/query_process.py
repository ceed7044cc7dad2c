"""What runs inside a query process: its start, the loop that answers the API process's
calls over its socket, and the calls themselves (a page read whole, a part of a page,
a stitched page to remember, the process's id).

The API process's side of the socket is `pool.QueryProcessPool`. Every message, both
ways, is a pickle after its length (`frame`): a call is `(function, args)`, an answer
`(True, value)` or `(False, exception)`. `read_encoded` is also what the API process's
threads run when queries stay in it (`TALLY_QUERY_PROCESSES=0`).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import socket
import threading
import time
from typing import Any

from tally.api.compression import (
    BodyGzip,
    DeflatedPiece,
    EncodedBody,
    deflate_piece,
    encode_json_body,
)
from tally.processes.collector import settle_garbage_collector
from tally.runtime import build_query_process_service
from tally.services.data_query import CountHint, DataAnswer, DataQueryService, DataRequest
from tally.services.workspace_rows import RowsPage, RowsRequest
from tally.settings import Settings

PARENT_CHECK_SECONDS = 1.0
FRAME_BYTES = 8  # the length before every message, little-endian

# What start_query_process builds, for the process's lifetime.
_service: DataQueryService | None = None
_gzip = BodyGzip(min_bytes=0, level=1)


def frame(message: object) -> bytes:
    """`message` as it goes on a query process's socket: its length, then its pickle."""
    pickled = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return len(pickled).to_bytes(FRAME_BYTES, "little") + pickled


def serve_calls(sock: socket.socket, settings: Settings, api_process: int) -> None:
    """A query process's life: start, then answer the calls that come on `sock`, one at
    a time and in order, until the API process closes it."""
    start_query_process(settings, api_process)
    with sock:
        while (message := _receive(sock)) is not None:
            function, args = pickle.loads(message)  # noqa: S301 - from our API process only
            try:
                answer = frame((True, function(*args)))
            except Exception as error:  # the caller raises it
                answer = frame((False, error))
            sock.sendall(answer)


def start_query_process(settings: Settings, api_process: int) -> None:
    global _service, _gzip
    # Ctrl-C (SIGINT) and a service manager's stop (SIGTERM, e.g. systemd's to the whole
    # control group) reach every process of the group; the API process stops its pool
    # itself (closing the socket ends this process), and would otherwise see its query
    # processes lost and start new ones on its way out.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The API process's id comes from it, not from os.getppid() here: a query process
    # still starting when the API process was killed already has another parent.
    threading.Thread(
        target=_exit_with_parent, args=(api_process,), name="tally-parent-watch", daemon=True
    ).start()
    _service = build_query_process_service(settings)
    _gzip = BodyGzip.from_settings(settings)
    settle_garbage_collector()


def _receive(sock: socket.socket) -> bytes | None:
    """The next message, or None when the API process closed the socket."""
    header = _read_exactly(sock, FRAME_BYTES)
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
    its pool). Its closed socket is seen only between two calls: a query process still
    starting or running a long query would keep its database connection until then."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


# --- the calls ------------------------------------------------------------------------


def read_encoded(
    service: DataQueryService, request: DataRequest, accept_encoding: str | None, gzip: BodyGzip
) -> tuple[EncodedBody, CountHint | None]:
    """A page read whole and encoded for the wire, with the count it computed."""
    answer = service.answer(request)
    encoded = encode_json_body(answer.body, accept_encoding=accept_encoding, gzip=gzip)
    return encoded, answer.count


def read_page(
    request: DataRequest, accept_encoding: str | None
) -> tuple[EncodedBody, CountHint | None]:
    assert _service is not None, "start_query_process builds it"
    return read_encoded(_service, request, accept_encoding, _gzip)


def read_page_part(
    request: DataRequest, deflate: bool, keep_rows: bool
) -> tuple[DataAnswer, DeflatedPiece | None]:
    """A part of a page: its answer, and its rows compressed when `deflate`; the plain
    rows are left out of the answer unless `keep_rows`."""
    assert _service is not None, "start_query_process builds it"
    answer = _service.answer(request)
    if answer.part is None or not deflate:
        return answer, None
    piece = deflate_piece(answer.part.rows, _gzip.level)
    if not keep_rows:
        answer = dataclasses.replace(answer, part=dataclasses.replace(answer.part, rows=b""))
    return answer, piece


def read_rows(request: RowsRequest) -> RowsPage:
    """A page for a member of the workspace (the console's resource table)."""
    assert _service is not None, "start_query_process builds it"
    return _service.read_rows(request)


def remember_page(key: tuple[Any, ...], body: bytes) -> None:
    assert _service is not None, "start_query_process builds it"
    _service.remember(key, body)


def query_process_pid() -> int:
    return os.getpid()
