"""The README's curl examples, pasted into bash against `tally serve --demo`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from support.servers import free_port
from support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
TALLY = [sys.executable, "-m", "tally"]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The demo without a worker: the webhook example's file is never fetched."""
    yield from _serve_demo(tmp_path, worker=False)


@pytest.fixture
def demo_with_worker(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The demo as README runs it: reconciliations re-run by its worker."""
    yield from _serve_demo(tmp_path, worker=True)


def _serve_demo(tmp_path: Path, *, worker: bool) -> Iterator[tuple[Path, dict[str, str]]]:
    port = free_port()
    env = {
        **os.environ,
        "TALLY_HOME": str(tmp_path / ".tally"),
        "TALLY_SERVE_WORKER": str(worker).lower(),
        "TALLY_LOG_LEVEL": "WARNING",
    }
    env.pop("TALLY_DATABASE_URL", None)
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [*TALLY, "serve", "--demo", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
    )
    try:
        assert process.stdout is not None
        printed = json.loads(process.stdout.readline())

        def answering() -> bool:
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                return True
            return False

        eventually(answering, timeout=30, what="tally serve --demo to answer")
        yield tmp_path, printed
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        log.close()


def _blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text().split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def _bash(script: str, cwd: Path) -> list[str]:
    """Run README lines as pasted; each curl's answer on a line of its own."""
    script = script.replace("curl -s", "curl -s --fail-with-body -w '\\n'")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line for line in done.stdout.splitlines() if line.strip()]


def test_data_api_examples_answer_as_documented(demo: tuple[Path, dict[str, str]]) -> None:
    folder, printed = demo
    assert printed["key"].startswith("tly_")
    # demo.env holds the key: TALLY_HOME and it are its owner's only (issue #14)
    home = folder / ".tally"
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "demo.env").stat().st_mode) == 0o600
    invite = httpx.get(printed["console_invite_url"], timeout=30)  # the console's first user
    assert invite.status_code == 200
    assert "Choose your password" in invite.text
    assert printed["console_user"] in invite.text
    lines = _bash(_blocks("Try it")[0], folder)
    health, by_amount, by_currency = (json.loads(line) for line in lines)
    assert health == {"status": "ok"}
    amounts = [row["amount"] for row in by_amount["data"]]
    assert len(amounts) == 3
    assert amounts == sorted(amounts, reverse=True)
    assert all(row["status"] == "settled" and row["amount"] >= 100 for row in by_amount["data"])
    assert by_currency["meta"]["page"] == 2
    assert all(set(row) == {"id", "amount", "currency"} for row in by_currency["data"])


def test_webhook_examples_register_and_queue(demo: tuple[Path, dict[str, str]]) -> None:
    """As pasted: the ids come from the answers, so a second demo's ids do too."""
    folder, _ = demo
    lines = _bash(_blocks("Try it")[1], folder)
    created, accepted, listing = (json.loads(line) for line in lines)
    assert created["name"] == "bank statements"
    assert created["webhook_id"].startswith("whk_")
    assert accepted == {"status": "accepted"}
    assert [f["status"] for f in listing["data"]] == ["queued"]
    assert listing["data"][0]["url"] == "https://files.example.com/stmt-2026-11-21.csv"
    assert [f["source_id"] for f in listing["data"]] == [created["id"]]


def test_reconciliation_examples_explain_and_keep_manual_work(
    demo_with_worker: tuple[Path, dict[str, str]],
) -> None:
    folder, _ = demo_with_worker
    status, unmatched = (json.loads(line) for line in _bash(_blocks("Reconcile")[0], folder))
    assert status["state"] == "idle"
    counts = status["last_run"]["counts"]
    assert (counts["matched"], counts["matched_with_difference"], counts["suggested"]) == (4, 1, 1)
    assert (counts["unmatched_left"], counts["unmatched_right"]) == (3, 2)
    reasons = {row["bank.reference"]: row["reason"] for row in unmatched["data"]}
    assert reasons["INV-1005"] == (
        "reference, small differences: nearest ledger row 7 (reference INV-1005): "
        "amount differs by 0.07, tolerance 0.05"
    )
    created, unmatched_fee = (json.loads(line) for line in _bash(_blocks("Reconcile")[1], folder))
    assert created["id"] == 3  # the demo holds a reconciliation and a transformation
    assert created["name"] == "Bank vs ledger, references"
    assert unmatched_fee["data"] == [
        {"bank._row": 7, "reason": "no ledger row with reference 'FEE-03' (after trim, casefold)"}
    ]
    matched, confirmed, actions = (
        json.loads(line) for line in _bash(_blocks("Reconcile")[2], folder)
    )
    assert matched == {"match_id": 6}
    assert confirmed["match_id"] == 8
    assert [a["kind"] for a in actions["data"]] == ["match", "confirm"]


def test_transformation_example_feeds_a_reconciliation(
    demo_with_worker: tuple[Path, dict[str, str]],
) -> None:
    folder, _ = demo_with_worker
    demo_one, top_eur = (json.loads(line) for line in _bash(_blocks("Transform")[0], folder))
    assert demo_one["state"] == "idle"
    assert [c["name"] for c in demo_one["columns"]] == [
        "counterparty",
        "currency",
        "amount",
        "payments",
    ]
    amounts = [row["amount"] for row in top_eur["data"]]
    assert len(amounts) == 3
    assert amounts == sorted(amounts, reverse=True)
    assert {row["currency"] for row in top_eur["data"]} == {"EUR"}
    preview, split = (json.loads(line) for line in _bash(_blocks("Transform")[1], folder))
    assert [c["name"] for c in preview["columns"]] == ["reference", "amount", "txn_date", "parts"]
    assert {"reference": "INV-1004", "amount": 1000.00, "txn_date": "2026-03-05", "parts": 2} in (
        preview["rows"]
    )
    assert split["data"] == [{"status": "matched", "ledger.amount": 1000.00, "ledger.parts": 2}]


def test_snapshot_example_replaces_the_rows_and_takes_the_file_back(
    demo_with_worker: tuple[Path, dict[str, str]],
) -> None:
    folder, _ = demo_with_worker
    script = _blocks("Snapshots and taking a file back")[0]
    data, retracted = (json.loads(line, parse_float=Decimal) for line in _bash(script, folder))
    rows = data["data"]
    assert [(r["ref"], r["amount"]) for r in rows] == [
        ("B", Decimal("20.00")),
        ("C", Decimal("30.00")),
    ]
    assert len({r["_file_id"] for r in rows}) == 1
    assert retracted["id"] == rows[0]["_file_id"]
    assert retracted["status"] == "retracted"
    assert retracted["retracted_by"].startswith("api key sha256:")
