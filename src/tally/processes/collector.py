"""Garbage-collector settings for tally's processes (see decision 0007)."""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager


def settle_garbage_collector() -> None:
    """Call once a process has started its real work (API, query process, worker, a
    load, the loader's checking process).

    Everything built at start-up (modules, FastAPI's routes, SQLAlchemy's tables) lives
    as long as the process; `gc.freeze` takes it out of every later collection, and a
    larger first generation makes collections rarer. Measured on the accept benchmark
    (64 connections, SQLite): full collections of the start-up objects paused the
    process for up to 70 ms, so p99 was 88 ms; frozen, 28 ms. A load allocates millions
    of short-lived strings: the loader's first pass over 1M rows took 4.1 s with the
    default thresholds, 3.6 s settled."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def freeze_at_exit() -> None:
    """Call once, where a process's command line is read. At its exit everything still
    alive is frozen before the interpreter's last collections, which then neither walk
    nor free it (they freed every module's reference cycles one by one): the operating
    system takes the memory back. `tally admin load` of a 10-row file took 0.63 s of
    CPU, 0.50 s so (issue #36). What must be closed is closed by its owner (the
    runtime's engines, the files' `with` blocks, the exit handlers registered before
    this one, which run after it)."""
    atexit.register(gc.freeze)


@contextmanager
def paused_collector() -> Iterator[None]:
    """The cyclic collector off for a phase that builds millions of objects which all
    live until it ends (a derived run's inputs read into lists, the engine's indexes):
    no collection could free one of them, yet each full collection walks them all, and
    the number of full collections grows with them. A reconciliation's full run on the
    1M pair (SQLite, settled thresholds): read phase 8.0 s, match 12.2 s; paused, 3.8-5.6
    s and 8.3-12.1 s (docs/benchmarks.md). Objects freed by reference counting go as
    always; the few cycles made meanwhile (~1,100 in that run) wait for the next
    collection."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
