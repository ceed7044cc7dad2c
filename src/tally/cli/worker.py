"""`tally worker`: the workers (deliveries, status callbacks, derived runs), alone
(any machine, PostgreSQL)."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from tally.processes.collector import settle_garbage_collector
from tally.processes.priority import lower_cpu_priority


def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="Jobs run at once (env: TALLY_WORKER_CONCURRENCY).")
    ] = None,
) -> None:
    """Run workers until SIGTERM or Ctrl-C; the jobs in hand are finished first."""
    # Imported here, not with the module: its handlers import every service, which
    # every other command (`tally admin ...`) would pay for at its start (issue #36).
    from tally.runtime import build_runtime
    from tally.settings import load_settings
    from tally.worker.runner import Worker

    settings = load_settings()
    niceness = lower_cpu_priority(settings.worker_niceness)
    runtime = build_runtime(settings)
    running = Worker(
        runtime,
        concurrency=concurrency or settings.worker_concurrency,
        poll_seconds=settings.worker_poll_seconds,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    try:
        settle_garbage_collector()
        running.start()
        typer.echo(f"tally worker ({runtime.backend_name}) started, nice {niceness}", err=True)
        stop.wait()
    finally:  # whatever happened, finish the jobs in hand and let the process end
        running.stop()
        runtime.close()
