"""`tally admin load` of hostile files (issue #14): the real command, on both backends.

A file over a limit (columns, header length, line length, value size) or a gzip bomb
is refused before anything is built, with the command's one JSON object
`{"error", "kind", "line", "column"}` and exit code 1: never a traceback, and no
library's chatter on stderr. Nothing of the refused load is kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from support.hostile import gzip_bomb, gzipped, wide_csv
from tally.settings import Settings
from tally.storage.schema import resources

COMMAND_TIMEOUT_SECONDS = 300
LIBRARY_CHATTER = ("re2.cc", "CoalesceWalker", "absl::", "DFA out of memory")


def run(settings: Settings, *args: str, **limits: str) -> tuple[int, dict[str, Any], str]:
    """`python -m tally ...` with the test's database (and `limits` as TALLY_* variables):
    its exit code, the one JSON object on stdout, and its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TALLY_")}
    env.update(TALLY_HOME=str(settings.home), TALLY_LOG_LEVEL="WARNING")
    if settings.database_url:
        env["TALLY_DATABASE_URL"] = settings.database_url
    env.update({f"TALLY_{name.upper()}": value for name, value in limits.items()})
    done = subprocess.run(
        [sys.executable, "-m", "tally", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line: {done.stdout!r}\n{done.stderr[-3000:]}"
    return done.returncode, json.loads(lines[0]), done.stderr


@pytest.fixture
def workspace(settings: Settings) -> int:
    _, account, _ = run(settings, "admin", "create-account", "--name", "Acme")
    _, created, _ = run(
        settings, "admin", "create-workspace", "--account", str(account["id"]), "--name", "Ops"
    )
    return int(created["id"])


def sources(settings: Settings) -> int:
    engine = sa.create_engine(settings.database_url or f"sqlite:///{settings.home / 'tally.db'}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(resources)).scalar_one())
    finally:
        engine.dispose()


CASES: dict[str, tuple[bytes, dict[str, str], tuple[str, ...], int | None, str | None]] = {
    # name: (file, limits, the error's words, line, column)
    "2,100 columns": (wide_csv(2100), {}, ("2100 columns", "TALLY_MAX_COLUMNS"), 1, "c500"),
    "100,000 columns": (wide_csv(100_000), {}, ("TALLY_MAX_HEADER_BYTES",), 1, None),
    "a long line": (
        b"id,note\n1,a\n2," + b"x" * 5000 + b"\n",
        {"max_line_bytes": "4096"},
        ("TALLY_MAX_LINE_BYTES",),
        3,
        None,
    ),
    "a long value": (
        b'id,note\n1,a\n2,"' + b"y\n" * 3000 + b'"\n',
        {"max_cell_bytes": "4096"},
        ("TALLY_MAX_CELL_BYTES",),
        3,
        "note",
    ),
    "a gzip bomb": (gzip_bomb(1 << 30), {}, ("TALLY_MAX_COMPRESSION_RATIO",), None, None),
    "gzip over the size limit": (
        gzipped(b"id,note\n" + b"".join(b"%d,n%d\n" % (n, n * 7919) for n in range(30_000))),
        {"max_file_bytes": "100000"},
        ("100000 bytes", "decompress"),
        None,
        None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_file_is_refused_with_its_json_error(
    settings: Settings, workspace: int, tmp_path: Path, case: str
) -> None:
    content, limits, words, line, column = CASES[case]
    path = tmp_path / "hostile.csv"
    path.write_bytes(content)
    code, printed, stderr = run(
        settings, "admin", "load", "--workspace", str(workspace), "--name", "x", str(path), **limits
    )
    assert code == 1, printed
    assert printed["kind"] == "LoadError", printed
    missing = [word for word in words if word not in printed["error"]]
    assert missing == [], printed
    assert printed.get("line") == line, printed
    assert printed.get("column") == column, printed
    assert "Traceback" not in stderr, stderr[-3000:]
    assert not any(text in stderr for text in LIBRARY_CHATTER), stderr[:3000]
    assert sources(settings) == 0


def test_a_table_the_database_refuses_is_a_load_error(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    """TALLY_MAX_COLUMNS raised past the database's own limit (SQLite 2,000 columns,
    PostgreSQL 1,600): the database refuses the table, and the command says so in its
    JSON object, not in a traceback."""
    path = tmp_path / "wide.csv"
    path.write_bytes(wide_csv(2100))
    args = ("admin", "load", "--workspace", str(workspace), "--name", "x", str(path))
    code, printed, stderr = run(settings, *args, max_columns="2500")
    assert code == 1, printed
    assert printed["kind"] == "LoadError", printed
    assert "the database refused the table for the file's 2100 columns: " in printed["error"]
    assert "columns" in printed["error"].partition(": ")[2], printed  # the database's words
    assert "Traceback" not in stderr, stderr[-3000:]
    assert sources(settings) == 0


def test_line_limits_count_utf8_text_and_place_a_utf16_line_exactly(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    """A line is measured as its text in UTF-8, whatever the file's encoding: a UTF-16
    line counts as long as in UTF-8 (not twice that), and a character that holds a line
    feed's byte in UTF-16 (上 is 0x0A 0x4E, 《 0x0A 0x30) ends no line."""
    rows = ["id,memo", *(f"{n},上海 《{n}》" for n in range(1, 4))]
    path = tmp_path / "utf16.csv"

    def load(lines: list[str]) -> tuple[int, dict[str, Any], str]:
        path.write_bytes("\n".join([*lines, ""]).encode("utf-16"))
        args = ("admin", "load", "--workspace", str(workspace), "--encoding", "utf-16")
        return run(settings, *args, "--name", f"n{len(lines)}", str(path), max_line_bytes="4096")

    code, printed, stderr = load([*rows, "4," + "x" * 3000])  # 6,004 bytes in UTF-16
    assert (code, printed.get("rows")) == (0, 4), (printed, stderr[-3000:])
    code, printed, _ = load([*rows, "4," + "x" * 5000, "5,after"])
    assert code == 1, printed
    assert printed["line"] == 5, printed
    assert "limit of 4096 bytes of UTF-8 text (TALLY_MAX_LINE_BYTES)" in printed["error"]
