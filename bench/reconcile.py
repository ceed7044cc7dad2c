#!/usr/bin/env python3
"""Reconciliation (issue #11) on tally's backends, beside what an analyst would run
instead (the kit's `recon_peers.py`: pandas and DuckDB), on the same generated pair.

    .venv/bin/python bench/reconcile.py                          # 1M pair, sqlite+postgresql
    BENCH_RECON_ROWS=100000 .venv/bin/python bench/reconcile.py  # quick
    BENCH_RECON_MEMORY=100000,1000000,2000000 BENCH_BACKENDS=sqlite \
        .venv/bin/python bench/reconcile.py                      # memory against input size

One backend, start to finish (only tally's CLI and HTTP API, plus a read-only look at
the output's table to count the true pairs it found):

1. the pair (`gen_transactions.py --pair --rows N --seed S`, cached in BENCH_WORK); the
   ledger's last BENCH_RECON_LATE rows (by date) are held back as the late file;
2. a fresh home (PostgreSQL: a throwaway cluster with default durability), `tally admin
   load` of bank.csv and of the rest of ledger.csv;
3. `tally admin create-reconciliation` with the three passes recon_peers.py runs, then
   `tally admin run-reconciliation`, timed: wall time (process start-up included: the
   output is readable when it returns), the run's own started_at..finished_at, the
   process's peak RSS (wait4);
4. `tally serve`; the late file uploaded to the ledger source (`feed-source`), timed until
   the reconciliation's run that read it has finished (the worker ran it by itself);
5. the output's rows read through the Data API into a CSV and loaded as a source (the
   same columns, names and values; only the kind differs), then reads,
   TALLY_RESPONSE_CACHE=false, sequential, p50 of 30 after 5 warm-ups: the bank source's
   first page, then the first page and the `status=unmatched` first page of that
   output-shaped source and of the output (each with its body's bytes);
6. the true pairs found: the output's (bank.id, ledger.id) pairs against truth.csv;
7. the peers on the whole pair, in the same run (`recon_peers.py --dir`).

With BENCH_RECON_MEMORY=sizes, only steps 1-3 for each size (the whole ledger, no late
file): the run's peak RSS against input size.

Results: BENCH_RESULTS (default bench/results/recon-<UTC time>/): `recon.json`,
`recon.md`, `logs/`.
"""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests")]

import procs  # noqa: E402
import run  # noqa: E402
import tally_target as tt  # noqa: E402
from derived_bench import (  # noqa: E402
    api,
    delivered_after,
    feed,
    load_sources,
    md_table,
    output_columns,
    pair_dir,
    tenant,
    timed_run,
)
from procs import log  # noqa: E402
from tally_target import Home, fresh_home  # noqa: E402

RUN_TIMEOUT_SECONDS = 1800
LATE_TIMEOUT_SECONDS = 300
READ_WARMUP, READ_REPEAT = 5, 30
PASSES = [  # what recon_peers.py runs: exact, near, split
    {"name": "exact", "type": "one_to_one", "keys": [{"left": "reference", "right": "reference"}]},
    {
        "name": "near",
        "type": "one_to_one",
        "keys": [{"left": "reference", "right": "reference"}],
        "amount_tolerance": "0.01",
        "date_window": [-3, 3],
    },
    {"name": "split", "type": "one_to_many", "keys": [{"left": "reference", "right": "reference"}]},
]


def settings() -> dict[str, Any]:
    env = os.environ.get
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    memory = env("BENCH_RECON_MEMORY", "")
    return {
        "rows": int(env("BENCH_RECON_ROWS", "1000000")),
        "seed": int(env("BENCH_RECON_SEED", "42")),
        "late": int(env("BENCH_RECON_LATE", "10000")),
        "memory": [int(n) for n in memory.split(",") if n.strip()],
        "peers": [p for p in env("BENCH_RECON_PEERS", "pandas,duckdb").split(",") if p],
        "results": Path(env("BENCH_RESULTS", str(REPO / "bench" / "results" / f"recon-{stamp}"))),
    }


# --- the pair -----------------------------------------------------------------------------


def split_ledger(folder: Path, late: int, into: Path) -> tuple[Path, Path]:
    """The ledger without its last `late` rows, and those rows as a file of their own."""
    lines = (folder / "ledger.csv").read_bytes().splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    main, tail = into / "ledger_main.csv", into / "ledger_late.csv"
    main.write_bytes(header + b"".join(body[: len(body) - late]))
    tail.write_bytes(header + b"".join(body[len(body) - late :]))
    return main, tail


# --- tally ----------------------------------------------------------------------------


def definition(bank_id: int, ledger_id: int) -> dict[str, Any]:
    side = {"amount": "amount", "date": "txn_date"}
    return {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": bank_id, **side},
        "right": {"name": "ledger", "resource_id": ledger_id, **side},
        "passes": PASSES,
    }


def late_file(
    server: tt.Server, who: dict[str, Any], recon_id: int, ledger_id: int, late: Path
) -> dict[str, Any]:
    """Upload the late ledger rows; wait until a run that read them has finished. The
    seconds from the upload, and from the file's delivery (its rows in the ledger) to
    the run's end (its output readable with them), by the server's clock; each phase
    GET showed while polling (`run.phase`) with the time it began."""
    _, before = api(server, "GET", f"/api/v2/reconciliations/{recon_id}", who)
    version = before["last_run"]["inputs"]["right"]["data_version"]
    uploaded = dt.datetime.now(dt.UTC)
    t0 = time.perf_counter()
    feed(server, who, ledger_id, late)
    deadline = time.monotonic() + LATE_TIMEOUT_SECONDS
    seen: dict[str, str] = {}  # phase -> phase_since, as the polls saw them
    while time.monotonic() < deadline:
        _, now = api(server, "GET", f"/api/v2/reconciliations/{recon_id}", who)
        if now.get("run"):
            seen.setdefault(now["run"]["phase"], now["run"]["phase_since"])
        last = now.get("last_run") or {}
        if last.get("inputs", {}).get("right", {}).get("data_version", 0) > version:
            if now["state"] in ("idle", "queued"):
                seconds = time.perf_counter() - t0
                delivered = delivered_after(server, who, ledger_id)
                readable = dt.datetime.fromisoformat(last["finished_at"])
                return {
                    "seconds": round(seconds, 3),
                    "delivered_s": round((delivered - uploaded).total_seconds(), 3),
                    "delivered_to_readable_s": round((readable - delivered).total_seconds(), 3),
                    "phases_seen": seen,
                    "last_run": last,
                }
            if now["state"] == "failed":
                raise RuntimeError(f"the run failed: {now.get('error')}")
        time.sleep(tt.POLL_SECONDS)
    raise RuntimeError("the late file was not reconciled in time")


def reads(server: tt.Server, who: dict[str, Any], paths: dict[str, str]) -> dict[str, Any]:
    headers = {
        "Accept-Encoding": "gzip",
        "X-API-Key": who["key"],
        "workspace_id": str(who["workspace_id"]),
    }
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    out = {}
    for name, path in paths.items():
        times = []
        for n in range(READ_WARMUP + READ_REPEAT):
            status, body, elapsed = tt._get(conn, path, headers)
            if status != 200:
                raise RuntimeError(f"{path} answered {status}: {body[:300]!r}")
            if n >= READ_WARMUP:
                times.append(elapsed * 1000)
        total = json.loads(body)["meta"]["total_count"]
        out[name] = {
            "path": path,
            "p50_ms": round(statistics.median(times), 2),
            "total": total,
            "body_bytes": len(body),
        }
    conn.close()
    return out


def worker_idle(serve_log: Path, sources: int) -> None:
    """Until the serve log says each source is indexed: a worker vacuums and analyses a
    source's table after recording its indexes (what `wait_for_indexes` sees), and the
    late file is to find the service idle, not queued behind that."""
    deadline = time.monotonic() + LATE_TIMEOUT_SECONDS
    while serve_log.read_text().count(" resource_indexed ") < sources:
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not finish the sources")
        time.sleep(tt.POLL_SECONDS)


def readable_after(run_log: Path) -> float:
    """From the run's start to its output being readable (swapped in; its rows' JSON
    text and indexes come after), by the times of the command's two log lines."""

    def at(line: str) -> dt.datetime:
        return dt.datetime.strptime(line[:23] + "+0000", "%Y-%m-%d %H:%M:%S,%f%z")

    lines = run_log.read_text().splitlines()
    started = [at(line) for line in lines if " derived_run_started " in line][-1]
    readable = [at(line) for line in lines if " derived_output_readable " in line][-1]
    return round((readable - started).total_seconds(), 3)


def output_as_source(
    server: tt.Server, who: dict[str, Any], output_id: int, home: Home, log_path: Path
) -> int:
    """The output's rows, read through the Data API (10,000 a page) into a CSV with its
    columns and loaded as a source: the rows a reader of the output gets, in a resource
    whose only difference is its kind. Decimals stay the text the API sent."""
    headers = {"X-API-Key": who["key"], "workspace_id": str(who["workspace_id"])}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    path = home.path / "output_as_source.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        page = 1
        while True:
            url = f"/api/v1/resources/{output_id}/data?page_size=10000&page={page}"
            status, body, _ = tt._get(conn, url, headers)
            if status != 200:
                raise RuntimeError(f"{url} answered {status}: {body[:300]!r}")
            answer = json.loads(body, parse_float=decimal.Decimal)
            rows = answer["data"]
            if page == 1:
                names = list(rows[0]) if rows else []
                writer.writerow(names)
            writer.writerows([["" if r[n] is None else r[n] for n in names] for r in rows])
            if len(rows) < answer["meta"]["page_size"]:
                break
            page += 1
    conn.close()
    args = ["admin", "load", "--workspace", str(who["workspace_id"])]
    loaded = tt.tally_cli([*args, "--name", "output-as-source", str(path)], home.env, log_path)
    return int(loaded["id"])


def true_pairs(home: Path, url: str | None, resource_id: int, folder: Path) -> dict[str, Any]:
    """The output's (bank.id, ledger.id) pairs of matched rows against truth.csv."""
    conn, columns = output_columns(home, url, resource_id)
    bank, ledger, match = (columns[n]["physical"] for n in ("bank.id", "ledger.id", "match_id"))
    sql = f"SELECT {bank}, {ledger} FROM r_{int(resource_id)} WHERE {match} IS NOT NULL"
    pairs = {(int(b), int(g)) for b, g in conn.execute(sql).fetchall()}
    conn.close()
    with open(folder / "truth.csv", newline="") as f:
        truth = {
            (int(r["bank_id"]), int(r["ledger_id"]))
            for r in csv.DictReader(f)
            if r["bank_id"] and r["ledger_id"]
        }
    return {
        "pairs": len(pairs),
        "truth_pairs": len(truth),
        "truth_found": len(pairs & truth),
        "wrong_pairs": len(pairs - truth),
    }


def backend_run(
    cfg: run.Config, opts: dict[str, Any], backend: str, folder: Path, *, late: int, serve: bool
) -> dict[str, Any]:
    rec: dict[str, Any] = {"backend": backend, "label": f"tally-{backend}", "late": late}
    try:
        with fresh_home(cfg, backend, rec, "recon") as home:
            _measure(cfg, rec, home, folder, late=late, serve=serve)
    except Exception as error:  # recorded; the other targets still run
        rec["error"] = f"{type(error).__name__}: {error}"
        log(f"{backend}: FAILED {rec['error']}")
    return rec


def _measure(
    cfg: run.Config, rec: dict[str, Any], home: Home, folder: Path, *, late: int, serve: bool
) -> None:
    backend = home.backend
    admin_log = cfg.logs / f"tally-{backend}-admin.log"
    who = tenant(home.env, admin_log)
    ledger, late_csv = (
        split_ledger(folder, late, home.path) if late else (folder / "ledger.csv", None)
    )
    files = {"bank": folder / "bank.csv", "ledger": ledger}
    loads = rec["loads"] = load_sources(cfg, home, who, files, rec)
    bank_id, ledger_id = loads["bank"]["resource_id"], loads["ledger"]["resource_id"]
    spec = home.path / "recon.json"
    spec.write_text(json.dumps(definition(bank_id, ledger_id)))
    args = ["admin", "create-reconciliation", "--workspace", str(who["workspace_id"])]
    created = tt.tally_cli([*args, "--file", str(spec)], home.env, admin_log)
    rec["created"] = created
    log(f"{backend}: tally admin run-reconciliation")
    run_log = cfg.logs / f"tally-{backend}-run.log"
    rec["run"] = timed_run(home, "run-reconciliation", created["id"], run_log)
    rec["run"]["readable_s"] = readable_after(run_log)
    log(
        f"{backend}: run readable after {rec['run']['readable_s']} s, command "
        f"{rec['run']['wall_s']} s, peak RSS {rec['run']['peak_rss_mb']} MB, phases "
        f"{rec['run']['last_run'].get('phases')}"
    )
    if not serve:
        return
    started = time.perf_counter()
    server = tt.start_server(cfg, home.env, home.db_pids)
    try:
        rec["worker_finish"] = tt.wait_for_indexes(home.path, home.url, started)
        worker_idle(cfg.logs / f"{tt.cfg_label(home.env)}-serve.log", len(files))
        assert late_csv is not None
        log(f"{backend}: the late ledger file ({late:,} rows)")
        rec["late_file"] = late_file(server, who, created["id"], ledger_id, late_csv)
        log(
            f"{backend}: late file readable after {rec['late_file']['seconds']} s; phases seen "
            f"{rec['late_file']['phases_seen']}, split {rec['late_file']['last_run'].get('phases')}"
        )
        tt.wait_for_indexes(home.path, home.url, time.perf_counter())
        out = created["resource_id"]
        log(f"{backend}: the output's rows loaded as a source")
        alike = output_as_source(server, who, out, home, admin_log)
        tt.wait_for_indexes(home.path, home.url, time.perf_counter())
        rec["reads"] = reads(
            server,
            who,
            {
                "source first page": f"/api/v1/resources/{bank_id}/data",
                "output-shaped source first page": f"/api/v1/resources/{alike}/data",
                "output first page": f"/api/v1/resources/{out}/data",
                "output-shaped source status=unmatched": (
                    f"/api/v1/resources/{alike}/data?status=unmatched"
                ),
                "output status=unmatched": f"/api/v1/resources/{out}/data?status=unmatched",
            },
        )
    finally:
        procs.stop(server.proc)
    rec["truth"] = true_pairs(home.path, home.url, created["resource_id"], folder)


def peers(cfg: run.Config, opts: dict[str, Any], folder: Path) -> list[dict[str, Any]]:
    if not opts["peers"]:
        return []
    log(f"peers: recon_peers.py {','.join(opts['peers'])}")
    cmd = [str(cfg.venv / "bin" / "python"), str(cfg.kit / "recon_peers.py"), "--dir", str(folder)]
    out = subprocess.run(
        [*cmd, "--engines", ",".join(opts["peers"])],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    (cfg.logs / "recon_peers.log").write_text(out.stderr + out.stdout)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


# --- the report ---------------------------------------------------------------------------


def _found(t: dict[str, Any]) -> str:
    return f"{t.get('truth_found', 0):,} of {t.get('truth_pairs', 0):,}" if t else ""


def report(
    records: list[dict[str, Any]],
    peer_records: list[dict[str, Any]],
    memory: list[dict[str, Any]],
    opts: dict[str, Any],
) -> str:
    lines = [
        f"Pair: {opts['rows']:,} bank rows, seed {opts['seed']}; late ledger file "
        f"{opts['late']:,} rows.",
        "",
    ]
    runs, read_rows = [], []
    for r in records:
        if "error" in r:
            runs.append([r["label"], f"failed: {r['error']}"])
            continue
        run_, truth = r["run"], r.get("truth", {})
        late = r.get("late_file", {})
        runs.append(
            [
                r["label"],
                run_.get("readable_s"),
                run_["wall_s"],
                run_["run_s"],
                run_["cpu_s"],
                run_.get("db_server_cpu_s"),
                run_["peak_rss_mb"],
                f"{late.get('delivered_to_readable_s')} ({late.get('seconds')})" if late else None,
                _found(truth),
                truth.get("wrong_pairs"),
            ]
        )
        for name, read in r.get("reads", {}).items():
            read_rows.append(
                [r["label"], name, read["p50_ms"], f"{read['total']:,}", f"{read['body_bytes']:,}"]
            )
    for p in peer_records:
        runs.append(
            [
                p.get("engine"),
                p.get("seconds"),
                p.get("seconds"),
                p.get("match_seconds"),
                None,
                None,
                p.get("peak_rss_mb_process"),
                None,
                _found(p),
                p.get("wrong_pairs"),
            ]
        )
    if runs:
        header = [
            "target",
            "readable s (peers: their whole run)",
            "wall s",
            "run s (matching, for peers)",
            "CPU s",
            "DB CPU s",
            "peak RSS MB",
            "late file: delivered to readable s (from its upload)",
            "true pairs found",
            "wrong pairs",
        ]
        lines += md_table(header, runs)
    if read_rows:
        lines += md_table(["target", "read", "p50 ms", "rows", "body bytes"], read_rows)
    sizes = []
    for m in memory:
        if "error" in m:
            sizes.append([m["label"], f"{m['rows']:,}", f"failed: {m['error']}"])
            continue
        loads = m["loads"]
        sizes.append(
            [
                m["label"],
                f"{loads['bank']['rows']:,}",
                f"{loads['ledger']['rows']:,}",
                m["run"]["run_s"],
                m["run"]["peak_rss_mb"],
            ]
        )
    if sizes:
        lines += md_table(["target", "bank rows", "ledger rows", "run s", "peak RSS MB"], sizes)
    return "\n".join(lines) + "\n"


def main() -> int:
    cfg = run.load_config()
    opts = settings()
    cfg.results = opts["results"].resolve()
    cfg.logs.mkdir(parents=True, exist_ok=True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, procs.raise_on_signal)
    records, peer_records, memory = [], [], []
    try:
        run.kit_step(cfg, "setup")
        if opts["memory"]:
            for rows in opts["memory"]:
                folder = pair_dir(cfg, rows, opts["seed"])
                for backend in cfg.backends:
                    rec = backend_run(cfg, opts, backend, folder, late=0, serve=False)
                    rec["rows"] = rows
                    memory.append(rec)
        else:
            folder = pair_dir(cfg, opts["rows"], opts["seed"])
            for backend in cfg.backends:
                records.append(
                    backend_run(cfg, opts, backend, folder, late=opts["late"], serve=True)
                )
            peer_records = peers(cfg, opts, folder)
    finally:
        procs.stop_everything()
    everything = {"records": records, "peers": peer_records, "memory": memory, "settings": opts}
    (cfg.results / "recon.json").write_text(json.dumps(everything, indent=1, default=str))
    text = report(records, peer_records, memory, opts)
    (cfg.results / "recon.md").write_text(text)
    print(text)
    return 0 if all("error" not in r for r in records + memory) else 1


if __name__ == "__main__":
    sys.exit(main())
