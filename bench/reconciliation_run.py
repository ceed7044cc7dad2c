"""A reconciliation's whole run on a gen_transactions.py --pair folder: time by phase and
peak memory, on the database TALLY_HOME / TALLY_DATABASE_URL name.

  .venv/bin/python bench/reconciliation_run.py setup --dir /tmp/pair1m
  .venv/bin/python bench/reconciliation_run.py run --id ID [--profile out.prof]
  .venv/bin/python bench/reconciliation_run.py setup --dir /tmp/pair1m --late 10000
  .venv/bin/python bench/reconciliation_run.py late --id ID --file HOME/ledger_late.csv
  .venv/bin/python bench/reconciliation_run.py setup --dir /tmp/pair1m --currencies

`setup` loads bank.csv and ledger.csv as two sources (as `tally admin load` does),
finishes them as a worker would (rows' JSON text, indexes), creates the reconciliation
with the issue's first three passes, and prints its id. `run` (a fresh process, so its
peak RSS is the run's own) forgets the output's digest, so the run builds and publishes
the output whether or not it changed, runs it now, as `tally admin run-reconciliation` does, and
prints one JSON object: seconds until the run ended and until its output was readable
(swapped in; the run then stores its rows' JSON text and indexes it), the seconds of
each phase (from the run's log), peak RSS, the output's rows and last_run's counts.

With `--currencies`, `setup` also creates the same reconciliation with each side naming
its `currency` column (issue #32, point 4) over the same two sources, and prints its id
as `with_currencies`: `run` of one then the other measures what currencies cost.

With `--late N`, `setup` holds the ledger's last N rows back as `ledger_late.csv` (in the
current directory); `late` appends that file to the ledger (as a delivery's load does),
then runs the reconciliation now: the seconds of each, and the run's mode (incremental
or full) and rows re-examined.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]

from support.factories import Tenant  # noqa: E402
from support.reconciliation_pairs import PEER_DEFINITION  # noqa: E402
from support.reconciliation_runs import make_reconciliation  # noqa: E402
from tally.processes.collector import settle_garbage_collector  # noqa: E402
from tally.runtime import build_runtime  # noqa: E402
from tally.settings import load_settings  # noqa: E402


class _Phases(logging.Handler):
    """Keeps the `seconds` of the run's `derived_run_finished` log record, and when its
    output became readable (`derived_output_readable`)."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: dict[str, float] = {}
        self.readable_at = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "derived_output_readable":
            self.readable_at = time.perf_counter()
        if record.getMessage() == "derived_run_finished":
            self.seconds = dict(record.__dict__.get("seconds", {}))


def setup(folder: Path, late: int, *, currencies: bool = False) -> None:
    runtime = build_runtime(load_settings())
    files = {"bank": folder / "bank.csv", "ledger": folder / "ledger.csv"}
    if late:
        header, *body = (folder / "ledger.csv").read_bytes().splitlines(keepends=True)
        files["ledger"] = Path("ledger_main.csv")
        files["ledger"].write_bytes(header + b"".join(body[:-late]))
        Path("ledger_late.csv").write_bytes(header + b"".join(body[-late:]))
    account = runtime.admin.create_account(name="bench", allowed_origins=[])
    workspace = runtime.admin.create_workspace(
        account_id=account.id, name="bench", ingestion_enabled=False
    )
    ids = []
    for name in ("bank", "ledger"):
        started = time.perf_counter()
        loaded = runtime.catalogue.create_source_from_file(
            workspace_id=workspace.id, name=name, path=files[name]
        )
        runtime.catalogue.finish_resource(loaded.resource.id)
        ids.append(loaded.resource.id)
        print(
            f"{name}: {loaded.rows} rows in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
    definition = PEER_DEFINITION.to_json()
    definition["left"]["resource_id"], definition["right"]["resource_id"] = ids
    tenant = Tenant(account.id, workspace.id, key="")
    record = make_reconciliation(runtime.engine, tenant, definition)
    shown: dict[str, Any] = {"id": record.id, "sources": ids}
    if currencies:
        definition["name"] += ", currencies"
        definition["left"]["currency"] = definition["right"]["currency"] = "currency"
        shown["with_currencies"] = make_reconciliation(runtime.engine, tenant, definition).id
    print(json.dumps(shown))
    runtime.close()


def run(derived_id: int, profile: str | None) -> None:
    runtime = build_runtime(load_settings())
    settle_garbage_collector()  # as a worker does
    phases = _Phases()
    logging.getLogger("tally.derived").addHandler(phases)
    logging.getLogger("tally.derived").setLevel(logging.INFO)
    with runtime.engine.begin() as conn:  # as if the output had changed: a full build
        conn.exec_driver_sql(
            "UPDATE derived_resources SET output_digest = NULL, run_basis = NULL "
            f"WHERE id = {derived_id}"
        )
    profiler = cProfile.Profile() if profile else None
    sampler = _AnonymousPeak()
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    with sampler:
        record = runtime.derived.run_now(derived_id, kind="reconciliation", worker="bench")
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    seconds = time.perf_counter() - started
    last_run: dict[str, Any] = record.last_run or {}
    with runtime.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT row_count, data_version FROM resources WHERE id = {record.resource_id}"
        ).one()
    print(
        json.dumps(
            {
                "backend": runtime.backend_name,
                "seconds": round(seconds, 2),
                "readable_after": round(phases.readable_at - started, 2),
                "phases": phases.seconds,
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "peak_anonymous_mb": sampler.peak_mb,
                "output_rows": rows[0],
                "data_version": rows[1],
                "counts": last_run.get("counts"),
            }
        )
    )
    runtime.close()


class _AnonymousPeak:
    """The process's largest anonymous memory (RssAnon) while the run works, sampled
    every 20 ms. Peak RSS also counts the pages of SQLite's memory-mapped database the
    run touched (`mmap_size`, storage/engine.py): the kernel's file cache, shared and
    reclaimable, not memory the run holds."""

    def __init__(self) -> None:
        self.peak_mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    self.peak_mb = max(self.peak_mb, round(int(line.split()[1]) / 1024, 1))
            if self._done.wait(0.02):
                return


def late(derived_id: int, path: Path) -> None:
    runtime = build_runtime(load_settings())
    settle_garbage_collector()  # as a worker does
    phases = _Phases()
    logging.getLogger("tally.derived").addHandler(phases)
    logging.getLogger("tally.derived").setLevel(logging.INFO)
    with runtime.engine.connect() as conn:
        definition = conn.exec_driver_sql(
            f"SELECT definition FROM derived_resources WHERE id = {derived_id}"
        ).scalar_one()
    ledger = (json.loads(definition) if isinstance(definition, str) else definition)["right"]
    started = time.perf_counter()
    runtime.catalogue.append_file(int(ledger["resource_id"]), path)
    loaded = time.perf_counter()
    record = runtime.derived.run_now(derived_id, kind="reconciliation", worker="bench")
    ended = time.perf_counter()
    last_run: dict[str, Any] = record.last_run or {}
    print(
        json.dumps(
            {
                "backend": runtime.backend_name,
                "load_seconds": round(loaded - started, 2),
                "run_seconds": round(ended - loaded, 2),
                "readable_after_load": round(phases.readable_at - loaded, 2),
                "phases": phases.seconds,
                "mode": last_run.get("mode"),
                "rows_examined": last_run.get("rows_examined"),
                "counts": last_run.get("counts"),
            }
        )
    )
    runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["setup", "run", "late"])
    parser.add_argument("--late", type=int, default=0)
    parser.add_argument("--currencies", action="store_true")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--id", type=int)
    parser.add_argument("--profile")
    args = parser.parse_args()
    if args.mode == "setup":
        setup(args.dir, args.late, currencies=args.currencies)
    elif args.mode == "late":
        late(args.id, args.file)
    else:
        run(args.id, args.profile)


if __name__ == "__main__":
    main()
