"""Where and how a run was made: the machine, the versions, the command that
reproduces it, how long it took and what went wrong."""

from __future__ import annotations

from figures import Run, num, table
from targets import DEEP_PAGE_ROWS

PG_SETTINGS = ("fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "autovacuum")


def machine_section(run: Run) -> list[str]:
    m = run.run.get("machine", {})
    v = run.run.get("versions", {})
    pg = (run.tally.get("postgresql") or {}).get("postgres") or {}
    out = ["## Machine and versions", ""]
    out += table(
        ["", ""],
        [
            ["CPU", f"{m.get('cpu_model')} x {m.get('cpus')} (`nproc`)"],
            ["Memory", f"{m.get('mem_total_gib')} GiB"],
            ["OS / kernel", f"{m.get('os')} / {m.get('kernel')}"],
            [
                "Load average at start",
                " / ".join(f"{x:.2f}" for x in m.get("loadavg_at_start", [])),
            ],
            ["Files", f"CSV, databases and clusters under {m.get('tmp')} (same disk)"],
            [
                "tally",
                f"{v.get('tally')} at `{str(v.get('tally_git_sha'))[:12]}` (HEAD; the "
                "working tree may hold uncommitted changes)",
            ],
            [
                "Python (tally)",
                f"{v.get('python')}; fastapi {v.get('fastapi')}, uvicorn "
                f"{v.get('uvicorn')}, starlette {v.get('starlette')}, SQLAlchemy "
                f"{v.get('sqlalchemy')}, psycopg {v.get('psycopg')}, orjson "
                f"{v.get('orjson')}",
            ],
            ["SQLite (tally)", str(v.get("sqlite"))],
            [
                "PostgreSQL (tally)",
                (
                    f"{pg.get('server_version')}: "
                    + ", ".join(f"{k}={pg.get(k)}" for k in PG_SETTINGS)
                )
                if pg
                else "not run",
            ],
            [
                "Peers",
                "; ".join(f"{r['label']}: {r['target'].get('version')}" for r in run.peers)
                or "not run (BENCH_SKIP_PEERS)",
            ],
        ],
        align="--",
    )
    versions = run.folder / "versions.txt"
    if versions.exists():
        out += ["Kit venv (driver and peers):", "", "```", versions.read_text().strip(), "```", ""]
    return out


def reproduce_section(run: Run) -> list[str]:
    s = run.settings
    phases = run.run.get("phases", {})
    out = [
        "## Reproduce",
        "",
        "```bash",
        f"BENCH_ROWS={s.get('rows')} BENCH_DURATION={s.get('duration_s'):g} "
        f"BENCH_WARMUP={s.get('warmup_s'):g} BENCH_CONCURRENCY={s.get('concurrency')} "
        f"BENCH_ENGINE={s.get('engine')}"
        + (" BENCH_SKIP_PEERS=1" if s.get("skip_peers") else "")
        + f" BENCH_BACKENDS={','.join(s.get('backends', []))} bench/run.sh",
        "```",
        "",
    ]
    if phases:
        total = sum(phases.values())
        out += [
            f"Time taken by this run: {num(total / 60, 1)} min ("
            + ", ".join(f"{k} {num(v)} s" for k, v in phases.items())
            + ").",
            "",
        ]
    failed = {k: v for k, v in run.run.get("kit_steps", {}).items() if v != 0}
    errors = {b: r["error"] for b, r in run.tally.items() if r.get("error")}
    if failed or errors:
        out += [
            "**Problems in this run**: "
            + "; ".join(
                [f"kit step {k} exited {v}" for k, v in failed.items()]
                + [f"tally {b}: {e}" for b, e in errors.items()]
            )
            + (
                " (below 900,000 rows the Datasette steps exit 1 because of Q4, see above)"
                if run.rows < DEEP_PAGE_ROWS and any(k.startswith("datasette") for k in failed)
                else ""
            ),
            "",
        ]
    return out
