"""transform.md from transform.py's records: each transformation's time from the trigger
to readable on each backend beside DuckDB's and pandas', the ratios, the late file, the
checksums and issue #12's targets."""

from __future__ import annotations

from typing import Any

from derived_bench import md_table
from transform_queries import QUERIES

TARGET_S = 5.0  # each of (a), (b), (c) on SQLite
PG_FACTOR = 1.5  # PostgreSQL within this of SQLite
LATE_TARGET_S = 1.0  # the appended file refreshes (a)


def _ratio(a: float | None, b: float | None) -> str | None:
    return f"{a / b:.1f}x" if a and b else None


def _load(values: list[float] | None) -> str | None:
    return " / ".join(f"{x:.2f}" for x in values) if values else None


def _peer(peers: list[dict[str, Any]], engine: str, key: str) -> dict[str, Any]:
    return next((p for p in peers if p.get("engine") == engine and p.get("query") == key), {})


def _run(record: dict[str, Any], key: str) -> dict[str, Any]:
    return record.get("runs", {}).get(key, {})


def _agrees(got: dict[str, Any] | None, floor: dict[str, Any] | None) -> str | None:
    if not got or not floor:
        return None
    return "= DuckDB" if got == floor else "DIFFERS"


def runs_table(records: list[dict[str, Any]], peers: list[dict[str, Any]]) -> list[str]:
    rows = []
    for key, query in QUERIES.items():
        floor = _peer(peers, "duckdb", key).get("checksum")
        for r in records:
            run_ = _run(r, key)
            if not run_:
                rows.append([query["title"], r["label"], r.get("error", "not run")])
                continue
            rows.append(
                [
                    query["title"],
                    r["label"],
                    run_["readable_s"],
                    run_["wall_s"],
                    run_["run_s"],
                    run_["cpu_s"],
                    run_.get("db_server_cpu_s"),
                    run_["peak_rss_mb"],
                    f"{run_['rows']:,}",
                    _agrees(r.get("checksums", {}).get(key), floor),
                    _load(run_.get("loadavg_before")),
                ]
            )
        for engine in ("duckdb", "pandas"):
            p = _peer(peers, engine, key)
            if p:
                rows.append(
                    [
                        query["title"],
                        f"{engine} {p.get('version', '')}",
                        p["seconds"],
                        None,
                        p["query_seconds"],
                        None,
                        None,
                        p["peak_rss_mb"],
                        f"{p['checksum']['rows']:,}",
                        _agrees(p["checksum"], floor),
                        _load(p.get("loadavg")),
                    ]
                )
    header = [
        "transformation",
        "target",
        "trigger to readable s",
        "command returned s",
        "run s (query alone, for peers)",
        "CPU s",
        "DB CPU s",
        "peak RSS MB",
        "rows",
        "checksum",
        "load avg at start (1/5/15 min)",
    ]
    return md_table(header, rows)


def ratios_table(records: list[dict[str, Any]], peers: list[dict[str, Any]]) -> list[str]:
    by_backend = {r["backend"]: r for r in records}
    rows = []
    for key, query in QUERIES.items():
        sqlite = _run(by_backend.get("sqlite", {}), key).get("readable_s")
        pg = _run(by_backend.get("postgresql", {}), key).get("readable_s")
        duck = _peer(peers, "duckdb", key).get("seconds")
        pandas = _peer(peers, "pandas", key).get("seconds")
        rows.append(
            [
                query["title"],
                sqlite,
                pg,
                duck,
                pandas,
                _ratio(sqlite, duck),
                _ratio(pg, duck),
                _ratio(sqlite, pandas),
                _ratio(pg, pandas),
                _ratio(pg, sqlite),
            ]
        )
    header = ["transformation", "SQLite s", "PostgreSQL s", "DuckDB s", "pandas s"]
    header += ["SQLite/DuckDB", "PostgreSQL/DuckDB", "SQLite/pandas", "PostgreSQL/pandas"]
    return md_table([*header, "PostgreSQL/SQLite"], rows)


def _delivered_to_readable(late: dict[str, Any]) -> float | None:
    """The refresh alone: from the input's new rows readable to (a)'s."""
    delivered = late.get("delivered_s")
    return None if delivered is None else round(late["seconds"] - delivered, 3)


def late_table(records: list[dict[str, Any]]) -> list[str]:
    rows = []
    for r in records:
        for late in r.get("late", []):
            last = late["last_run"]
            rows.append(
                [
                    r["label"],
                    late["burst_s"],
                    f"{late['new_rows']:,}",
                    late["seconds"],
                    late.get("accepted_s"),
                    late.get("delivered_s"),
                    _delivered_to_readable(late),
                    late.get("run_started_s"),
                    "incremental" if last.get("incremental") else "full",
                    late["run_s"],
                    f"{late['rows']:,}",
                    _load(late["loadavg"]),
                ]
            )
    header = ["target", "TALLY_DERIVED_BURST_SECONDS", "new settled rows"]
    header += ["upload to (a) readable with them s", "upload answered s", "file delivered s"]
    header += ["delivered to (a) readable s", "(a)'s run began s"]
    header += ["(a)'s run", "its run s", "(a)'s rows"]
    return md_table([*header, "load avg at start"], rows)


def targets(records: list[dict[str, Any]]) -> list[str]:
    by_backend = {r["backend"]: r for r in records}
    sqlite, pg = by_backend.get("sqlite", {}), by_backend.get("postgresql", {})
    out = []

    def verdict(ok: bool | None) -> str:
        return "not measured" if ok is None else ("met" if ok else "NOT met")

    for key, query in QUERIES.items():
        s = _run(sqlite, key).get("readable_s")
        p = _run(pg, key).get("readable_s")
        out.append(
            f"- {query['title']}: SQLite {s} s (at most {TARGET_S:g} s: "
            f"{verdict(None if s is None else s <= TARGET_S)}); PostgreSQL {p} s (within "
            f"{PG_FACTOR:g}x of SQLite: "
            f"{verdict(None if s is None or p is None else p <= PG_FACTOR * s)})"
        )
    for r in records:
        for late in r.get("late", []):
            # the refresh: from the file's rows readable in (a)'s input to (a) showing them
            refresh = _delivered_to_readable(late)
            ok = None if refresh is None else refresh <= LATE_TARGET_S
            out.append(
                f"- {r['label']}, the 10k file, burst {late['burst_s']}: (a) refreshed "
                f"{refresh} s after the file was delivered (at most {LATE_TARGET_S:g} s: "
                f"{verdict(ok)}); {late['seconds']} s after the upload, the file's own "
                "load included"
            )
    return [*out, ""]


def checksum_lines(records: list[dict[str, Any]], peers: list[dict[str, Any]]) -> list[str]:
    out = []
    for key, query in QUERIES.items():
        floor = _peer(peers, "duckdb", key).get("checksum")
        others = [(r["label"], r.get("checksums", {}).get(key)) for r in records]
        others.append(("pandas", _peer(peers, "pandas", key).get("checksum")))
        same = [label for label, got in others if got and got == floor]
        out.append(f"- {query['title']}: DuckDB {floor}; equal: {', '.join(same) or 'none'}")
    return [*out, ""]


def report(
    records: list[dict[str, Any]], peers: list[dict[str, Any]], facts: dict[str, Any]
) -> str:
    opts, machine, versions = facts["settings"], facts["machine"], facts["versions"]
    lines = [
        f"Payments CSV: {opts['rows']:,} rows; pair: {opts['pair_rows']:,} bank rows; "
        f"seed {opts['seed']}; late files: {opts['late']:,} rows each. tally "
        f"`{str(versions.get('tally_git_sha'))[:12]}`, {machine.get('cpu_model')} x "
        f"{machine.get('cpus')}, load average at start "
        f"{_load(list(machine.get('loadavg_at_start', [])))}.",
        "",
        "Targets (issue #12):",
        "",
        *targets(records),
        *runs_table(records, peers),
        *ratios_table(records, peers),
        *late_table(records),
        "Checksums (row count, exact sums):",
        "",
        *checksum_lines(records, peers),
    ]
    for r in records:
        if "error" in r:
            lines += [f"{r['label']} failed: {r['error']}", ""]
    return "\n".join(lines) + "\n"
