"""The console's benchmark (#33): server time per screen at p95 with the kit's 1M-row
source, and CSV export rows/s beside paging the Data API through the same rows, in the
same run, on both backends.

    .venv/bin/python bench/console.py    # writes bench/results/console-*.json

One fresh installation per backend: `tally admin load` of the kit's 1M-row CSV
(`BENCH_CSV`, declared columns) and of the kit's 1M pair (`BENCH_PAIR`: bank.csv and
ledger.csv, as bench/reconcile.py and bench/candidates.py load them), the pair
reconciled (`run-reconciliation`, bench/reconcile.py's three passes: a 1.1M-row output)
and transformation (b) of bench/transform_queries.py run on the 1M-row source, then
`tally serve` on 127.0.0.1 until the worker has stored every resource's rows' JSON text
and built the indexes, a viewer signed in through the console's own forms. Each screen
is asked BENCH_CONSOLE_WARMUP times, then BENCH_CONSOLE_REQUESTS times (default 100)
one after another on one keep-alive connection; the time is the request's wall time on
loopback (the server's time plus a loopback round trip), and the machine's load average
is recorded after each screen (other work shares it).

`screens()` lists the screens: add a page there (a name and its path) and it is measured:
the overview, the source's page, the transformation's, the reconciliation's summary, and
the resource table of the 1M-row source and of the reconciliation's output.
Then the export: the whole 1M rows as CSV from `/console/resources/{id}/export.csv`,
beside the Data API read page after page (page_size 10000, `ordering=_row`), each timed
to its last byte received (gzip decoded, as any client must), and once more with each
page's JSON decoded (exact decimals), and once more with the decoded rows written as CSV
(the export's artefact, made from pages), BENCH_CONSOLE_EXPORTS times each (default 2,
alternating), the best of each; the response cache off, so that every page is read
from the database as the export's rows are. Targets: every screen under 100 ms at p95;
the export at least as fast as the Data API's pages.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import ingest  # noqa: E402
import procs  # noqa: E402
from formats import CLEAN_COLUMNS  # noqa: E402
from reconcile import definition  # noqa: E402
from snapshots import wait_finished  # noqa: E402
from transform_queries import QUERIES  # noqa: E402

CSV = ingest.CSV
PAIR = Path(os.environ.get("BENCH_PAIR", str(CSV.parent / "pair_1000000_s42")))
TRANSFORMATION = QUERIES["b"]  # GROUP BY over the 1M-row source (named `t` in its SQL)
BACKENDS = os.environ.get("BENCH_BACKENDS", "sqlite,postgresql").split(",")
REQUESTS = int(os.environ.get("BENCH_CONSOLE_REQUESTS", "100"))
WARMUP = int(os.environ.get("BENCH_CONSOLE_WARMUP", "5"))
EXPORTS = int(os.environ.get("BENCH_CONSOLE_EXPORTS", "2"))
PASSWORD = "bench password, long enough"
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}
TARGET_P95_MS = 100.0
DATA_API_PAGE_SIZE = 10_000


@dataclass(frozen=True)
class Made:
    """What one installation holds: the 1M-row source, the reconciliation of the pair
    and its output, the transformation."""

    source: int
    reconciliation: int
    output: int
    transformation: int
    resources: tuple[int, ...]  # every resource whose rows a worker finishes


def screens(made: Made) -> list[tuple[str, str]]:
    """Each screen measured: (name, path)."""
    table = f"/console/resources/{made.source}"
    output = f"/console/resources/{made.output}"
    return [
        ("overview", "/console/overview"),
        ("source", f"/console/sources/{made.source}"),
        ("transformation", f"/console/transformations/{made.transformation}"),
        ("reconciliation: summary", f"/console/reconciliations/{made.reconciliation}"),
        ("reconciliation output: first page", output),
        ("reconciliation output: status=unmatched", f"{output}?status=unmatched"),
        ("reconciliation output: sorted by ledger.amount", f"{output}?ordering=-ledger.amount"),
        ("table: first page", table),
        ("table: filtered (status=settled)", f"{table}?status=settled"),
        ("table: sorted by amount", f"{table}?ordering=-amount"),
        ("table: filtered and sorted", f"{table}?currency__in=USD,EUR&ordering=amount&page=3"),
        ("table: deep page (rows 900,001-900,050)", f"{table}?ordering=id&page=18001"),
    ]


def load_source(env: dict[str, str], workspace: str) -> int:
    columns = Path(env["TALLY_HOME"]) / "columns.json"
    columns.write_text(json.dumps({"columns": CLEAN_COLUMNS}))
    args = ["admin", "load", "--workspace", workspace, "--name", "ledger", "--columns"]
    shown = ingest.tally([*args, str(columns), str(CSV)], env)
    procs.log(f"loaded {shown['rows']} rows")
    return int(shown["id"])


def make_everything(env: dict[str, str], workspace: str) -> Made:
    """The sources loaded, the pair reconciled and the transformation run, each by the
    CLI in its own process (no server yet: its worker then finishes every resource)."""
    source = load_source(env, workspace)
    home = Path(env["TALLY_HOME"])
    pair = {}
    for side in ("bank", "ledger"):
        args = ["admin", "load", "--workspace", workspace, "--name", f"pair {side}"]
        pair[side] = int(ingest.tally([*args, str(PAIR / f"{side}.csv")], env)["id"])
    spec = home / "reconciliation.json"
    spec.write_text(json.dumps(definition(pair["bank"], pair["ledger"])))
    args = ["admin", "create-reconciliation", "--workspace", workspace, "--file", str(spec)]
    reconciliation = ingest.tally([*args], env)
    procs.log("run-reconciliation of the 1M pair")
    ingest.tally(["admin", "run-reconciliation", "--id", str(reconciliation["id"])], env)
    spec = home / "transformation.json"
    body = {k: TRANSFORMATION[k] for k in ("name", "sql")}
    spec.write_text(json.dumps({**body, "inputs": {"t": source}}))
    args = ["admin", "create-transformation", "--workspace", workspace, "--file", str(spec)]
    transformation = ingest.tally(args, env)
    ingest.tally(["admin", "run-transformation", "--id", str(transformation["id"])], env)
    outputs = (int(reconciliation["resource_id"]), int(transformation["resource_id"]))
    return Made(
        source=source,
        reconciliation=int(reconciliation["id"]),
        output=outputs[0],
        transformation=int(transformation["id"]),
        resources=(source, pair["bank"], pair["ledger"], *outputs),
    )


def signed_in_user(
    env: dict[str, str], base: str, workspace: str, role: str = "viewer"
) -> httpx.Client:
    """A client holding a session of a user `bench` of that role: the invite's form,
    then the sign-in form."""
    made = ingest.tally(
        ["admin", "create-user", "--workspace", workspace, "--name", "bench", "--role", role],
        env,
    )
    token = made["invite_url"].rsplit("/", 1)[-1]
    client = httpx.Client(base_url=base, timeout=600, headers=SAME_ORIGIN)
    form = {"password": PASSWORD, "confirmation": PASSWORD}
    accepted = client.post(f"/console/invite/{token}", data=form)
    if accepted.status_code != 303:
        raise RuntimeError(f"the invite answered {accepted.status_code}")
    signed = client.post("/console/sign-in", data={"username": "bench", "password": PASSWORD})
    if signed.status_code != 303:
        raise RuntimeError(f"sign-in answered {signed.status_code}")
    return client


def time_screen(client: httpx.Client, path: str) -> dict[str, Any]:
    for _ in range(WARMUP):
        client.get(path).raise_for_status()
    times = []
    for _ in range(REQUESTS):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    p95 = statistics.quantiles(times, n=100, method="inclusive")[94]
    shown = re.search(r"rows [0-9,]+\u2013[0-9,]+ of [0-9,]+", response.text)
    return {
        "path": path,
        "requests": REQUESTS,
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(p95, 2),
        "max_ms": round(max(times), 2),
        "shows": shown.group(0) if shown else None,
        "under_target": p95 < TARGET_P95_MS,
        "load_average_after": os.getloadavg(),  # other sessions' work shares the machine
    }


def time_export(client: httpx.Client, resource_id: int) -> tuple[float, int]:
    """Seconds to the CSV's last byte, and its rows (lines less the header)."""
    started = time.perf_counter()
    lines = 0
    with client.stream("GET", f"/console/resources/{resource_id}/export.csv") as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            lines += chunk.count(b"\r\n")
    return time.perf_counter() - started, lines - 1


def time_data_api(
    base: str, key: str, workspace: str, resource_id: int, *, mode: str = "bytes"
) -> tuple[float, int]:
    """Seconds to the last page's last byte, paging in row order, and the rows read.
    `mode`: "bytes" reads each page and no more; "decoded" also decodes its JSON with
    exact decimals, as a client that uses the rows must; "csv" also writes them as CSV
    with the columns' labels as header: the artefact Export CSV gives, made from pages."""
    headers = {"X-API-Key": key, "workspace_id": workspace}
    rows, page = 0, 1
    sink = io.StringIO()
    writer = csv.writer(sink, lineterminator="\r\n")
    started = time.perf_counter()
    with httpx.Client(base_url=base, timeout=600, headers=headers) as api:
        while True:
            params = {"ordering": "_row", "page": page, "page_size": DATA_API_PAGE_SIZE}
            response = api.get(f"/api/v1/resources/{resource_id}/data", params=params)
            response.raise_for_status()
            returned = int(re.findall(rb'"returned_count":\s*([0-9]+)', response.content)[-1])
            rows += returned
            if mode != "bytes":
                found = json.loads(response.content, parse_float=Decimal)["data"]
                if mode == "csv":
                    if page == 1 and found:
                        writer.writerow(found[0])
                    writer.writerows(
                        ["" if v is None else v for v in row.values()] for row in found
                    )
                    sink.seek(0)
                    sink.truncate()
            if returned < DATA_API_PAGE_SIZE:
                return time.perf_counter() - started, rows
            page += 1


def export_phase(
    client: httpx.Client, base: str, key: str, workspace: str, resource_id: int
) -> dict[str, Any]:
    """The export beside the Data API paged three ways (the response cache is off: every
    page is read from the database, as the export is)."""
    runs: dict[str, list[tuple[float, int]]] = {"csv_export": []}
    modes = {"data_api_pages": "bytes", "data_api_pages_decoded": "decoded",
             "data_api_pages_to_csv": "csv"}  # fmt: skip
    for _ in range(EXPORTS):
        runs["csv_export"].append(time_export(client, resource_id))
        for name, mode in modes.items():
            runs.setdefault(name, []).append(
                time_data_api(base, key, workspace, resource_id, mode=mode)
            )
    result: dict[str, Any] = {}
    for name, timed in runs.items():
        seconds, rows = min(timed)
        result[name] = {"rows": rows, "seconds": round(seconds, 2),
                        "rows_per_second": round(rows / seconds)}  # fmt: skip
    result["data_api_pages"] |= {"page_size": DATA_API_PAGE_SIZE, "ordering": "_row"}
    csv_seconds = result["csv_export"]["seconds"]
    result["export_at_least_as_fast"] = {  # than each way of paging
        name: csv_seconds <= result[name]["seconds"] for name in modes
    }
    return result


def backend_phase(backend: str) -> dict[str, Any]:
    env = ingest.installation(backend)
    headers = ingest.tenant(env)
    workspace = headers["x-svc-workspace"]
    made = make_everything(env, workspace)
    resource_id = made.source
    # no response cache: the Data API's pages read again would be served from it, and
    # the export has none
    _, base = ingest.serve({**env, "TALLY_RESPONSE_CACHE": "false"}, f"console-{backend}")
    for each in made.resources:
        wait_finished(env, each)
    client = signed_in_user(env, base, workspace)
    result: dict[str, Any] = {"load_average_before": os.getloadavg(), "screens": {}}
    for name, path in screens(made):
        result["screens"][name] = time_screen(client, path)
        procs.log(f"{backend}: {name}: p95 {result['screens'][name]['p95_ms']} ms")
    result.update(export_phase(client, base, headers["data_key"], workspace, resource_id))
    result["load_average_after"] = os.getloadavg()
    procs.log(f"{backend}: export {result['csv_export']}, pages {result['data_api_pages']}")
    client.close()
    procs.stop_everything()
    shutil.rmtree(env["TALLY_HOME"], ignore_errors=True)  # a gigabyte on SQLite
    return result


def main() -> None:
    results: dict[str, Any] = {"file": str(CSV), "cpus": os.cpu_count()}
    try:
        for backend in BACKENDS:
            results[backend] = backend_phase(backend)
    finally:
        procs.stop_everything()  # a failed phase leaves no server behind
    ingest.write_results("console", results)


if __name__ == "__main__":
    main()
