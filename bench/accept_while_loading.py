"""Notifications accepted while a 1M-row file loads, beside the idle figure (issue #14).

    .venv/bin/python bench/accept_while_loading.py   # both backends; JSON on stdout and
                                                     # in bench/results/accept-loading-*.json

For each backend, fresh installations (bench/ingest.py's):

1. Idle: `tally serve` with its worker off; 64 keep-alive connections send notifications
   for BENCH_ACCEPT_SECONDS (bench/ingest.py's accept load).
2. Loading: `tally serve` with its worker off, and one `tally worker` process (so the
   figure is the database's lock, not two threads sharing one interpreter). One
   notification of the kit's 1M-row CSV (a loopback file server); once the file is
   `loading`, the same 64 connections send notifications until the file is final, while
   a prober registers a webhook (POST /api/v2/webhooks) and reads /health every 0.5 s.
   Requests that started while the file was `loading` are counted apart from those
   that started afterwards, while the worker stored the rows' JSON text and built the
   indexes (decisions 0010, 0011), until it logged `resource_indexed`. The worker's log
   is searched for failed lease renewals.
3. PostgreSQL only, the loading phase again in a new database on the same server,
   after the first load's database was vacuumed and a checkpoint made: a server in
   service, whose log segments are recycled, where a new server creates and zero-fills
   a 16 MB file for each segment the load's COPY fills (docs/decisions/0022). SQLite
   has no such one-off.

The 64 connections run in a process of their own: the watcher's and prober's threads
(HTTP clients, JSON) held the interpreter's lock for milliseconds at a time, and every
connection's timing stalled with them (until 2026-11-28 each status poll built an httpx
client: 15 ms of CPU, every 0.1 s, counted in the p99 while loading).

Target (issue #14): accept p99 < 50 ms at concurrency 64 while the file loads, on both
backends. Everything listens on 127.0.0.1; every process started is stopped by PID.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.synchronize
import os
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

import durable_pg  # noqa: E402
import ingest  # noqa: E402
import procs  # noqa: E402
import psycopg  # noqa: E402

CONCURRENCY = ingest.CONCURRENCY
TALLY = ingest.TALLY
RESULTS = ingest.RESULTS
PROBE_SECONDS = 0.5
LOAD_TIMEOUT_SECONDS = 900.0
Stop = multiprocessing.synchronize.Event


def _stats(latencies: list[float]) -> dict[str, Any]:
    if not latencies:
        return {"requests": 0}
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


async def _connection(
    port: int, path: str, stop: Stop, offset: int, seen: list[tuple[float, float, int]]
) -> None:
    """One keep-alive connection sending notifications until `stop`: (start, latency,
    status) of each."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    n = 0
    while not stop.is_set():
        body = json.dumps({"file_url": f"http://127.0.0.1:9/l-{offset}-{n}.csv"}).encode()
        request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            f"application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        started = time.perf_counter()
        writer.write(request)
        status_line = await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        await reader.readexactly(length)
        seen.append((started, time.perf_counter() - started, int(status_line.split()[1])))
        n += 1
    writer.close()


def _notify_until(
    port: int, path: str, stop: Stop, results: multiprocessing.SimpleQueue[list[Any]]
) -> None:
    """In a process of its own: CONCURRENCY connections notify until `stop`; the
    (start, latency, status) of each notification go back through `results`."""
    seen: list[tuple[float, float, int]] = []

    async def run() -> None:
        await asyncio.gather(*(_connection(port, path, stop, i, seen) for i in range(CONCURRENCY)))

    asyncio.run(run())
    results.put(seen)


def _file_status(client: httpx.Client, auth: dict[str, str], source_id: int) -> str | None:
    files = client.get(f"/api/v2/sources/{source_id}/files", headers=auth).json()
    return files["data"][0]["status"] if files["data"] else None


def _watch(
    client: httpx.Client,
    auth: dict[str, str],
    source_id: int,
    worker_log: Path,
    window: dict[str, float],
    stop: Stop,
) -> None:
    """Mark when the file stops `loading`, then when its source is indexed; then stop."""
    deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
    while time.monotonic() < deadline and _file_status(client, auth, source_id) == "loading":
        time.sleep(0.1)
    window["end"] = time.perf_counter()
    while time.monotonic() < deadline and "resource_indexed" not in worker_log.read_text(
        errors="replace"
    ):
        time.sleep(0.1)
    window["indexed"] = time.perf_counter()
    stop.set()


def _probe(base: str, headers: dict[str, str], stop: Stop, out: dict[str, list[float]]) -> None:
    """Register a webhook and read /health every PROBE_SECONDS, timing each."""
    auth = {k: v for k, v in headers.items() if k.startswith("x-")}
    n = 0
    with httpx.Client(base_url=base, timeout=120) as client:
        while not stop.wait(PROBE_SECONDS):
            register = partial(
                client.post, "/api/v2/webhooks", headers=auth, json={"name": f"p{n}", "webhook": {}}
            )
            _timed(out, "register", register)
            _timed(out, "health", lambda: client.get("/health"))
            n += 1


def _timed(out: dict[str, list[float]], name: str, request: Callable[[], object]) -> None:
    started = time.perf_counter()
    try:
        request()
    except httpx.TransportError:
        out[f"{name}_failed"].append(0.0)
    out[name].append(time.perf_counter() - started)


def loading_phase(backend: str, env: dict[str, str], label: str) -> dict[str, Any]:
    """The file loaded once into `env`'s installation, notifications timed meanwhile; its
    processes are stopped afterwards (a PostgreSQL server is left running)."""
    headers = ingest.tenant(env)
    auth = {k: v for k, v in headers.items() if k.startswith("x-")}
    _, file_url = ingest.file_server(ingest.CSV.parent)
    _, base = ingest.serve({**env, "TALLY_SERVE_WORKER": "false"}, f"loading-{backend}")
    worker_log = RESULTS / f"accept-loading-worker-{backend}-{label}.log"
    worker_log.unlink(missing_ok=True)
    procs.spawn(
        [str(TALLY), "worker", "--concurrency", "1"], env=env, cwd=HERE, log_path=worker_log
    )
    big_id, big_webhook = ingest.register(base, headers, "big")
    _, accept_webhook = ingest.register(base, headers, "accept")
    client = httpx.Client(base_url=base, timeout=60)
    client.post(
        f"/api/v2/webhooks/{big_webhook}/feed-source", json={"file_url": file_url}
    ).raise_for_status()
    deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
    while _file_status(client, auth, big_id) != "loading" and time.monotonic() < deadline:
        time.sleep(0.05)
    procs.log(f"{backend} ({label}): the file is loading; {CONCURRENCY} connections notify")
    window = {"start": time.perf_counter()}  # CLOCK_MONOTONIC: the same in the child
    stop = multiprocessing.get_context("fork").Event()
    probes: dict[str, list[float]] = {
        "register": [],
        "health": [],
        "register_failed": [],
        "health_failed": [],
    }
    port = int(base.rsplit(":", 1)[1])
    path = f"/api/v2/webhooks/{accept_webhook}/feed-source"
    fork = multiprocessing.get_context("fork")  # the child inherits `stop`
    results: multiprocessing.SimpleQueue[list[tuple[float, float, int]]] = fork.SimpleQueue()
    notifier = fork.Process(target=_notify_until, args=(port, path, stop, results))
    notifier.start()
    threads = [
        threading.Thread(target=_watch, args=(client, auth, big_id, worker_log, window, stop)),
        threading.Thread(target=_probe, args=(base, headers, stop, probes)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seen = results.get()
    notifier.join()
    during = [latency for started, latency, _ in seen if started <= window["end"]]
    failures = [status for started, _, status in seen if started <= window["end"] and status >= 300]
    after = [latency for started, latency, _ in seen if started > window["end"]]
    loading_s = window["end"] - window["start"]
    final = client.get(f"/api/v2/sources/{big_id}/files", headers=auth).json()
    client.close()
    result = {
        "loading_s": round(loading_s, 2),
        "accept": {
            **_stats(during),
            "per_second": round((len(during) - len(failures)) / loading_s, 1),
            "failures": len(failures),
        },
        "after_delivery_until_indexed": {
            "seconds": round(window["indexed"] - window["end"], 2),
            **_stats(after),
        },
        "register_webhook": {
            **_stats(probes["register"]),
            "failed": len(probes["register_failed"]),
        },
        "health": {**_stats(probes["health"]), "failed": len(probes["health_failed"])},
        "lease_renewals_failed": worker_log.read_text(errors="replace").count(
            "lease_renewal_failed"
        ),
        "file": {k: final["data"][0][k] for k in ("status", "rows", "attempts", "error")},
    }
    procs.stop_children()
    return result


def _settle_disk() -> None:
    """Write out what earlier phases left in the page cache (SQLite's phase leaves
    gigabytes): the kernel would otherwise write it back during the next phase, and
    every fsync of that phase would queue behind it."""
    os.sync()


def in_service(env: dict[str, str]) -> None:
    """Leave the server as one in service would be before its next file: the earlier
    load vacuumed (autovacuum's work) and a checkpoint made (every 5 minutes by
    default), which recycles the log segments that load filled instead of a new file
    being created and zero-filled for each 16 MB of log the next load writes."""
    url = env["TALLY_DATABASE_URL"]
    procs.log(f"postgresql: vacuumed in {durable_pg.vacuum(url)} s; a checkpoint")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")


def main() -> None:
    signal.signal(signal.SIGTERM, procs.raise_on_signal)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"csv": str(ingest.CSV), "concurrency": CONCURRENCY}
    try:
        for backend in os.environ.get("BENCH_BACKENDS", "sqlite,postgresql").split(","):
            _settle_disk()
            out[backend] = {"idle": ingest.accept_phase(backend, "1")}
            env = ingest.installation(backend)
            _settle_disk()
            out[backend]["while_loading"] = loading_phase(backend, env, "new-server")
            if backend == "postgresql":  # a second database on the same server
                in_service(env)
                server = procs.postgres_servers[-1]
                again = ingest.installation(backend, server)
                _settle_disk()
                out[backend]["while_loading_in_service"] = loading_phase(
                    backend, again, "in-service"
                )
            procs.stop_everything()
    finally:
        procs.stop_everything()
    path = RESULTS / f"accept-loading-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
