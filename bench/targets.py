"""The issue's targets, checked against one run's figures: met, NOT met, or not
measured. Each check returns one row of the report's targets table."""

from __future__ import annotations

from typing import Any

from figures import QUERIES, ROAPI, Row, Run, num, p50, q, rps, table

# "Constant memory": twice the rows may cost at most this factor of peak heap.
MEMORY_GROWTH_LIMIT = 1.10
DEEP_PAGE_ROWS = 900_000  # Q4 reads rows 899,001-900,000


# --- targets ------------------------------------------------------------------------------


def verdict(ok: bool | None, why: str = "") -> str:
    if ok is None:
        return f"not measured{': ' + why if why else ''}"
    return "met" if ok else "**NOT met**"


def fastest_peer(run: Run, name: str) -> tuple[str, float] | None:
    best = [(r["label"], rps(r, name)) for r in run.peers if rps(r, name) is not None]
    return max(best, key=lambda x: x[1]) if best else None  # type: ignore[arg-type, return-value]


def _vs_roapi(run: Run, label: str, name: str) -> list[Any]:
    mine, theirs = rps(run.result(label), name), rps(run.result(ROAPI), name)
    if mine is None or theirs is None:
        return [
            f"{name} at least as fast as ROAPI",
            label,
            f"{num(mine)} vs {num(theirs)} req/s",
            verdict(None, "no figure"),
        ]
    return [
        f"{name} at least as fast as ROAPI",
        label,
        f"{num(mine)} vs {num(theirs)} req/s (p50 {num(p50(run.result(label), name))} vs "
        f"{num(p50(run.result(ROAPI), name))} ms)",
        verdict(mine >= theirs),
    ]


def _vs_fastest(run: Run, label: str, name: str) -> list[Any]:
    mine, best = rps(run.result(label), name), fastest_peer(run, name)
    if mine is None or best is None:
        return [f"{name} ≥ 5x the fastest peer", label, num(mine), verdict(None, "no figure")]
    ratio = mine / best[1] if best[1] else None
    return [
        f"{name} ≥ 5x the fastest peer",
        label,
        f"{num(mine)} req/s vs {best[0]} {num(best[1])} req/s = {num(ratio, 2)}x",
        verdict(ratio is not None and ratio >= 5),
    ]


def _export(run: Run, label: str) -> list[Any]:
    got = q(run.result(label), "Q6")
    value = None if got is None else got.get("rows_per_s")
    return [
        "Q6 export ≥ 200,000 rows/s",
        label,
        f"{num(value)} rows/s",
        verdict(None if value is None else value >= 200_000),
    ]


def _deep(run: Run, label: str) -> list[Any]:
    a, b = p50(run.result(label), "Q4"), p50(run.result(label), "Q1")
    ratio = a / b if a is not None and b else None
    return [
        "Q4 (deep page) within 3x of Q1 (p50)",
        label,
        f"{num(a)} vs {num(b)} ms = {num(ratio, 2)}x (req/s {num(rps(run.result(label), 'Q4'))}"
        f" vs {num(rps(run.result(label), 'Q1'))})",
        verdict(None if ratio is None else ratio <= 3),
    ]


def _pg_vs_sqlite(run: Run) -> list[list[Any]]:
    lite, pg = run.result("tally-sqlite"), run.result("tally-postgresql")
    rows: list[list[Any]] = []
    for name in QUERIES:
        a, b = p50(pg, name), p50(lite, name)
        ratio = a / b if a is not None and b else None
        rows.append(
            [
                f"PostgreSQL within 1.5x of SQLite: {name} (p50, PostgreSQL vs SQLite)",
                "both",
                f"{num(a)} vs {num(b)} ms = {num(ratio, 2)}x",
                verdict(None if ratio is None else ratio <= 1.5),
            ]
        )
    a6, b6 = q(pg, "Q6"), q(lite, "Q6")
    if a6 and b6 and a6.get("rows_per_s"):
        ratio = b6["rows_per_s"] / a6["rows_per_s"]
        rows.append(
            [
                "PostgreSQL within 1.5x of SQLite: Q6 (rows/s, PostgreSQL vs SQLite)",
                "both",
                f"{num(a6['rows_per_s'])} vs {num(b6['rows_per_s'])} rows/s: SQLite's rate is "
                f"{num(ratio, 2)}x PostgreSQL's",
                verdict(ratio <= 1.5),
            ]
        )
    else:
        rows.append(["PostgreSQL within 1.5x of SQLite: Q6", "both", "-", verdict(None)])
    return rows


def _copy_anchor(run: Run) -> Row | None:
    return next(
        (
            a
            for a in run.anchors
            if a.get("ok")
            and str(a.get("system", "")).startswith("PostgreSQL")
            and "no index" in str(a.get("method", ""))
        ),
        None,
    )


def _load_targets(run: Run) -> list[list[Any]]:
    out: list[list[Any]] = []
    lite = (run.tally.get("sqlite") or {}).get("load")
    if lite:
        out.append(
            [
                "Load the CSV in under 10 s on SQLite",
                "tally-sqlite",
                f"{num(lite['seconds'], 2)} s, rows readable when it returns"
                + _indexes_note(run.tally["sqlite"]),
                verdict(lite["seconds"] < 10),
            ]
        )
    pg = (run.tally.get("postgresql") or {}).get("load")
    copy = _copy_anchor(run)
    if pg and copy:
        ratio = pg["seconds"] / copy["seconds"]
        out.append(
            [
                "Load within 2x of COPY on PostgreSQL",
                "tally-postgresql",
                f"{num(pg['seconds'], 2)} s vs COPY {num(copy['seconds'], 2)} s = "
                f"{num(ratio, 2)}x, rows readable when it returns (COPY: a typed table, "
                "no index)" + _indexes_note(run.tally["postgresql"]),
                verdict(ratio <= 2),
            ]
        )
    elif pg:
        out.append(
            [
                "Load within 2x of COPY on PostgreSQL",
                "tally-postgresql",
                f"{num(pg['seconds'], 2)} s",
                verdict(None, "no COPY anchor"),
            ]
        )
    for backend, rec in run.tally.items():
        if rec.get("load") and rec.get("load_half"):
            out.append(_memory(f"tally-{backend}", rec))
    return out


def _indexes_note(rec: Row) -> str:
    """How long the worker took to index what was loaded (decision 0010)."""
    built = rec.get("worker_indexes")
    if not built:
        return ""
    return (
        f"; then `tally serve`'s worker built the indexes of the three loaded sources "
        f"(1, 1/2 and 1/10 of the file) {num(built['seconds_from_serve_start'], 2)} s "
        "after the server started"
    )


def _memory(label: str, rec: Row) -> list[Any]:
    """Peak anonymous RSS (the heap; mapped database pages excluded) of the whole
    file's load against its first half's, with the first tenth's for the trend."""
    key = "peak_rss_anon_mb" if rec["load"].get("peak_rss_anon_mb") else "peak_rss_mb"
    parts = [rec[k] for k in ("load_tenth", "load_half", "load") if rec.get(k)]
    half, full = rec["load_half"], rec["load"]
    growth = full[key] / half[key] if half.get(key) else None
    return [
        f"Load at constant memory (peak {'heap' if 'anon' in key else 'RSS'}, whole file vs "
        "its first half)",
        label,
        ", ".join(f"{num(p.get(key))} MB for {num(p['rows'])} rows" for p in parts)
        + f": {num(growth, 2)}x",
        verdict(None if growth is None else growth <= MEMORY_GROWTH_LIMIT),
    ]


def _exact_counts(run: Run, label: str) -> list[Any]:
    result = run.result(label)
    if result is None:
        return ["Exact total_count in every answer, cache off", label, "-", verdict(None)]
    bad = []
    for name, got in result.get("queries", {}).items():
        if got.get("error") or not got.get("valid"):
            bad.append(f"{name} invalid")
        elif not got.get("export") and not any(
            c.startswith("total_count") and c.endswith("ok") for c in got.get("checks", [])
        ):
            bad.append(f"{name} count unchecked")
        elif got.get("export") and got.get("total_count_reported") != got.get("rows"):
            bad.append(f"Q6 total_count {got.get('total_count_reported')} ≠ {got.get('rows')}")
    return [
        "Exact total_count in every answer, response cache off",
        label,
        "all checks passed" if not bad else "; ".join(bad),
        verdict(not bad),
    ]


def targets_section(run: Run) -> list[str]:
    rows: list[list[Any]] = []
    for backend in run.tally:
        label = f"tally-{backend}"
        rows.append(_exact_counts(run, label))
        rows += [_vs_roapi(run, label, "Q1"), _vs_roapi(run, label, "Q3")]
        rows += [_vs_fastest(run, label, n) for n in ("Q2", "Q4", "Q5")]
        rows += [_export(run, label), _deep(run, label)]
    if len(run.tally) == 2:
        rows += _pg_vs_sqlite(run)
    rows += _load_targets(run)
    if run.rows < DEEP_PAGE_ROWS:  # Q4's page 900 lies past the last row: nothing to judge
        for row in rows:
            if "Q4" in row[0]:
                row[3] = verdict(None, f"page 900 is past the last of {num(run.rows)} rows")
    head = ["## Targets", ""]
    if not run.is_full:
        head += [
            "*Small run: these verdicts apply to this run's size only, not to the targets.*",
            "",
        ]
    head += [
        '"Fastest peer" is the highest req/s any peer measured in this run reached for '
        "that query, whatever it computed (ROAPI and Datasette's `_nocount` variant "
        "compute no count). Request-rate targets compare req/s at the run's "
        'concurrency; "within Nx" compares p50 latencies; "constant memory" is '
        "met when the peak heap (anonymous RSS) of the whole file's load is at most "
        f"{MEMORY_GROWTH_LIMIT}x that of its first half: bounded "
        "buffers, such as the 64 MiB SQLite page cache tally configures, fill up on the way "
        "and then stay flat, while anything that grows with the file doubles.",
        "",
    ]
    return head + table(["target", "where", "measured", "verdict"], rows, align="----")
