"""gen_transactions.py --pair files as the matching engine's input: SideRows built straight
from the CSVs (the runs read them from the database instead), for the truth test and the
engine's benchmark (bench/reconciliation_engine.py)."""

from __future__ import annotations

import copy
import csv
import datetime as dt
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from support.reconciliations import ISSUE_PASSES
from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.services.reconciliation.matching import ContentLookup, SideRow, key_columns

REPO = Path(__file__).resolve().parents[2]
SCALE = 2  # the generator writes amounts with two decimals

# The issue's first three passes, as the kit's recon_peers.py defines them.
PEER_DEFINITION = ReconciliationDefinition.from_json(
    {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": 1, "amount": "amount", "date": "txn_date"},
        "right": {"name": "ledger", "resource_id": 2, "amount": "amount", "date": "txn_date"},
        "passes": [
            {
                "name": "exact",
                "type": "one_to_one",
                "keys": [{"left": "reference", "right": "reference"}],
            },
            {
                "name": "near",
                "type": "one_to_one",
                "keys": [{"left": "reference", "right": "reference"}],
                "amount_tolerance": "0.01",
                "date_window": [-3, 3],
            },
            {
                "name": "split",
                "type": "one_to_many",
                "keys": [{"left": "reference", "right": "reference"}],
            },
        ],
    }
)


# The issue's example definition, all four passes (normalised keys, a pass without keys).
ISSUE_DEFINITION = ReconciliationDefinition.from_json(
    {
        "name": "Bank vs ledger",
        "left": {"name": "bank", "resource_id": 1, "amount": "amount", "date": "txn_date"},
        "right": {"name": "ledger", "resource_id": 2, "amount": "amount", "date": "txn_date"},
        "passes": copy.deepcopy(ISSUE_PASSES),
    }
)


def kit() -> Path | None:
    """The shared benchmark kit (BENCH_KIT, else ../shared/bench beside the repository,
    beside its worktrees' folder, or beside the checkout a clone was made from, as CI's
    clean clone is), or None where it is absent."""
    candidates = [os.environ.get("BENCH_KIT", "")]
    ups = [REPO.parent, REPO.parent.parent]
    origin = subprocess.run(
        ["git", "-C", str(REPO), "config", "--get", "remote.origin.url"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if origin.startswith("/"):  # a clone of a checkout on this machine
        ups.append(Path(origin).parent)
    candidates += [str(up / "shared" / "bench") for up in ups]
    for candidate in candidates:
        if candidate and (Path(candidate) / "gen_transactions.py").is_file():
            return Path(candidate)
    return None


def generate_pair(folder: Path, rows: int, seed: int) -> None:
    generator = kit()
    assert generator is not None
    command = [sys.executable, str(generator / "gen_transactions.py"), "--pair"]
    command += ["--rows", str(rows), "--seed", str(seed), "--out", str(folder)]
    subprocess.run(command, check=True, capture_output=True, timeout=600)


def scaled(text: str, scale: int = SCALE) -> int | None:
    """ "-12.3" -> -1230 at scale 2 (exact; no float)."""
    if not text:
        return None
    whole, _, fraction = text.partition(".")
    assert len(fraction) <= scale, text
    return int(whole + fraction.ljust(scale, "0"))


def read_side(path: Path, definition: ReconciliationDefinition, which: SideName) -> list[SideRow]:
    """A side's rows as the engine takes them (position = line number, 1-based)."""
    side = definition.side(which)
    columns = key_columns(definition, which)
    days: dict[str, int] = {}  # one int per distinct date: shared, and parsed once
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        keys_at = [header.index(c) for c in columns]
        amount_at = header.index(side.amount) if side.amount else None
        date_at = header.index(side.date) if side.date else None
        for position, record in enumerate(reader, start=1):
            day = None
            if date_at is not None and (text := record[date_at][:10]):
                day = days.get(text)
                if day is None:
                    day = days[text] = dt.date.fromisoformat(text).toordinal()
            rows.append(
                SideRow(
                    position,
                    tuple(record[i] or None for i in keys_at),
                    scaled(record[amount_at]) if amount_at is not None else None,
                    day,
                )
            )
    return rows


def _typed(header: list[str], record: list[str]) -> tuple[Any, ...]:
    """A generated row's typed values in column order (empty -> None)."""
    out: list[Any] = []
    for name, text in zip(header, record, strict=True):
        if not text:
            out.append(None)
        elif name == "id":
            out.append(int(text))
        elif name == "txn_date":
            out.append(dt.date.fromisoformat(text))
        elif name == "booked_at":
            out.append(dt.datetime.fromisoformat(text))
        elif name in ("amount", "fee"):
            out.append(Decimal(text))
        else:
            out.append(text)
    return tuple(out)


def content_lookup(paths: Mapping[SideName, Path]) -> ContentLookup:
    """The rows' typed values, read back from the CSV for the positions asked (rarely)."""

    def lookup(which: SideName, positions: Sequence[int]) -> Mapping[int, tuple[Any, ...]]:
        wanted = set(positions)
        found: dict[int, tuple[Any, ...]] = {}
        with paths[which].open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader)
            for position, record in enumerate(reader, start=1):
                if position in wanted:
                    found[position] = _typed(header, record)
        return found

    return lookup


def read_truth(path: Path) -> tuple[set[tuple[int, int]], set[int], set[int]]:
    """truth.csv: the true (bank, ledger) pairs, the bank-only rows, the ledger-only rows."""
    pairs, bank_only, ledger_only = set(), set(), set()
    with path.open(newline="", encoding="utf-8") as f:
        for record in csv.DictReader(f):
            bank, ledger = record["bank_id"], record["ledger_id"]
            if bank and ledger:
                pairs.add((int(bank), int(ledger)))
            elif bank:
                bank_only.add(int(bank))
            else:
                ledger_only.add(int(ledger))
    return pairs, bank_only, ledger_only
