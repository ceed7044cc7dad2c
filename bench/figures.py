"""One benchmark run's results folder, read back: settings, tally's records, the
driver's result files and the load anchors; plus the small formatting helpers the
report is written with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FULL_ROWS = 1_000_000
QUERIES = ("Q1", "Q2", "Q3", "Q4", "Q5")
TALLY_PREFIX = "tally-"
ROAPI = "roapi"
Row = dict[str, Any]


# --- reading ------------------------------------------------------------------------


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


class Run:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.run: Row = _load(folder / "run.json") or {}
        self.settings: Row = self.run.get("settings", {})
        self.tally: dict[str, Row] = {}
        for backend in ("sqlite", "postgresql"):
            rec = _load(folder / f"tally-{backend}.json")
            if rec:
                self.tally[backend] = rec
        results = [_load(p) for p in sorted(folder.glob("bench-*.json"))]
        # tally first (SQLite, PostgreSQL), then the peers in the order they ran
        self.results: list[Row] = sorted(
            (r for r in results if r),
            key=lambda r: (
                not r["label"].startswith(TALLY_PREFIX),
                r["label"] != "tally-sqlite",
                r.get("started_at", ""),
            ),
        )
        self.anchors: list[Row] = []
        ingest = folder / "ingest.jsonl"
        if ingest.exists():
            self.anchors = [json.loads(x) for x in ingest.read_text().splitlines() if x.strip()]

    def result(self, label: str) -> Row | None:
        return next((r for r in self.results if r["label"] == label), None)

    @property
    def peers(self) -> list[Row]:
        return [r for r in self.results if not r["label"].startswith(TALLY_PREFIX)]

    @property
    def rows(self) -> int:
        return int(self.settings.get("rows", 0))

    @property
    def is_full(self) -> bool:
        s = self.settings
        return (
            self.rows == FULL_ROWS
            and float(s.get("duration_s", 0)) >= 10
            and int(s.get("concurrency", 0)) == 8
        )


# --- formatting -----------------------------------------------------------------------


def num(v: Any, nd: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)


def table(header: list[str], rows: list[list[Any]], align: str | None = None) -> list[str]:
    align = align or "-" + "r" * (len(header) - 1)
    marks = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|"]
    out += [
        "| " + " | ".join(num(c) if not isinstance(c, str) else c for c in r) + " |" for r in rows
    ]
    return [*out, ""]


def q(result: Row | None, name: str) -> Row | None:
    if result is None:
        return None
    got = result.get("queries", {}).get(name)
    return None if got is None or got.get("error") else got


def rps(result: Row | None, name: str) -> float | None:
    got = q(result, name)
    return None if got is None else got.get("rps")


def p50(result: Row | None, name: str) -> float | None:
    got = q(result, name)
    return None if got is None else got.get("latency_ms", {}).get("p50")


def count_word(query: Row) -> str:
    if query.get("count_semantics", "").startswith("none"):
        return "none"
    return "exact" if query.get("total_count_reported") is not None else "null"
