"""Snapshot sources (#32, point 5): the kit's 1M-row CSV uploaded to a new source of
mode `replace` (a first load), then a second 1M-row snapshot replacing it, through
`tally serve` and its worker, on both backends.

    .venv/bin/python bench/snapshots.py    # writes bench/results/snapshots-*.json

Each load is timed from the file's record: `finished_at - created_at`, from the upload
queued (its body stored) to its rows committed and readable. Before each replacement
the worker has finished the source (rows' JSON text, indexes), as a day's snapshot finds
it. First loads and replacements alternate, BENCH_SNAPSHOT_REPEATS times each (default
2); the medians are compared. The target: a replacement within 1.5x of a first load.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import ingest  # noqa: E402
import procs  # noqa: E402
from formats import CLEAN_COLUMNS  # noqa: E402

CSV = ingest.CSV
REPEATS = int(os.environ.get("BENCH_SNAPSHOT_REPEATS", "2"))
BACKENDS = os.environ.get("BENCH_BACKENDS", "sqlite,postgresql").split(",")


def next_day(clean: Path, out: Path) -> None:
    """The next day's snapshot: the same ledger with one more row (other bytes)."""
    with clean.open("rb") as source, out.open("wb") as target:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            target.write(chunk)
        target.write(b"9999999,2026-11-29,2026-11-29T10:00:00Z,1.00,EUR,settled,x,y,z,\n")


def upload(base: str, auth: dict[str, str], source: int, path: Path) -> dict[str, Any]:
    """The file uploaded and followed until its loading ends; its final status."""
    with path.open("rb") as body:
        queued = httpx.post(
            f"{base}/api/v2/sources/{source}/feed-source",
            headers={**auth, "content-type": "text/csv"},
            content=body,
            timeout=600,
        )
    queued.raise_for_status()
    url = f"{base}/api/v2/sources/{source}/files/{queued.json()['file_id']}"
    while True:
        shown: dict[str, Any] = httpx.get(url, headers=auth, timeout=30).json()
        if shown["status"] in ("delivered", "failed", "duplicate"):
            if shown["status"] != "delivered":
                raise RuntimeError(f"the upload ended {shown['status']}: {shown['error']}")
            return shown
        time.sleep(0.1)


def load_seconds(shown: dict[str, Any]) -> float:
    created, finished = (dt.datetime.fromisoformat(shown[k]) for k in ("created_at", "finished_at"))
    return round((finished - created).total_seconds(), 2)


def wait_finished(env: dict[str, str], source: int) -> None:
    """Until a worker has stored the rows' JSON text and built the indexes; on SQLite
    the write-ahead log is then checkpointed, as it is long before the next day's file
    (a gigabyte of it, from the indexes, written back while the next load runs made one
    replacement take twice as long as the other in the same run)."""
    url = env.get("TALLY_DATABASE_URL") or f"sqlite:///{env['TALLY_HOME']}/tally.db"
    engine = sa.create_engine(url)
    try:
        query = sa.text(
            "SELECT data_version, indexed_version, rendered_version FROM resources WHERE id = :i"
        )
        while True:
            with engine.connect() as conn:
                data, indexed, rendered = conn.execute(query, {"i": source}).one()
            if data == indexed == rendered:
                break
            time.sleep(0.5)
        if engine.dialect.name == "sqlite":  # as a day later: the WAL checkpointed
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        engine.dispose()


def main() -> None:
    work = Path(os.environ.get("BENCH_SNAPSHOT_DIR", "/tmp/tally-bench"))
    second = work / (CSV.stem + "_next_day.csv")
    if not second.exists():
        procs.log(f"writing {second}")
        next_day(CSV, second)
    results: dict[str, Any] = {"file": str(CSV), "repeats": REPEATS}
    for backend in BACKENDS:
        env = ingest.installation(backend)
        headers = ingest.tenant(env)
        auth = {k: v for k, v in headers.items() if k.startswith("x-")}
        _, base = ingest.serve({**env, "TALLY_WORKER_CONCURRENCY": "1"}, f"snapshots-{backend}")
        times: dict[str, list[float]] = {"first": [], "replace": []}
        for i in range(REPEATS):
            created = httpx.post(
                f"{base}/api/v2/sources",
                headers=auth,
                json={"name": f"ledger {i}", "mode": "replace", "columns": CLEAN_COLUMNS},
                timeout=30,
            )
            created.raise_for_status()
            source = created.json()["id"]
            times["first"].append(load_seconds(upload(base, auth, source, CSV)))
            wait_finished(env, source)
            times["replace"].append(load_seconds(upload(base, auth, source, second)))
            procs.log(f"{backend}: first {times['first'][-1]} s, replace {times['replace'][-1]} s")
            wait_finished(env, source)
        first, replace = (statistics.median(times[k]) for k in ("first", "replace"))
        results[backend] = {**times, "ratio": round(replace / first, 3)}
        procs.stop_everything()
    ingest.write_results("snapshots", results)


if __name__ == "__main__":
    main()
