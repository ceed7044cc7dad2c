#!/usr/bin/env bash
# tally's benchmark in one command (see bench/README.md): loads the same CSV into
# tally (SQLite, PostgreSQL) and its peers, drives them all in one run, writes
# docs/benchmarks.md, then measures ingestion (bench/ingest.py) into the same report.
# Settings are BENCH_* environment variables.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="$REPO/.venv/bin/python"
if [ ! -x "$PY" ]; then
    echo "bench: $PY not found: create the project's venv first" >&2
    exit 2
fi
"$PY" "$REPO/bench/run.py" "$@"
# the ingestion figures (accept rate, notification to rows readable) join the same report
if [ "${BENCH_SKIP_INGEST:-0}" != 1 ]; then
    "$PY" "$REPO/bench/ingest.py"
fi
