"""`tally admin load --encoding` (issue #14, point 3), on both backends: a file is read
in the encoding given (UTF-8 by default, strictly), the source keeps it for its later
files, and an unknown name or a file not valid in it is the command's JSON error."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from tally.cli.main import app
from tally.settings import Settings
from tally.storage.schema import resources

MIXED = b"id,name\n1,caf\xc3\xa9\n2,caf\xe9\n"  # the file: UTF-8, then one Latin-1 byte
CP1252_CSV = "id,memo,amount\n1,€ 5 \u2013 Œuvre,1.50\n2,caf\xe9,-2\n".encode("cp1252")


def run(settings: Settings, *args: str) -> tuple[int, dict[str, Any]]:
    env = {"TALLY_HOME": str(settings.home), "TALLY_LOG_LEVEL": "WARNING"}
    if settings.database_url:
        env["TALLY_DATABASE_URL"] = settings.database_url
    result = CliRunner().invoke(app, list(args), env=env)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, f"stdout must be one JSON line, got {result.stdout!r}"
    return result.exit_code, json.loads(lines[0])


def ok(settings: Settings, *args: str) -> dict[str, Any]:
    code, printed = run(settings, *args)
    assert code == 0, printed
    return printed


def failed(settings: Settings, *args: str) -> dict[str, Any]:
    code, printed = run(settings, *args)
    assert code == 1, printed
    return printed


def source_count(settings: Settings) -> int:
    engine = sa.create_engine(settings.database_url or f"sqlite:///{settings.home / 'tally.db'}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(resources)).scalar_one())
    finally:
        engine.dispose()


@pytest.fixture
def workspace(settings: Settings) -> int:
    account = ok(settings, "admin", "create-account", "--name", "Acme")
    created = ok(
        settings, "admin", "create-workspace", "--account", str(account["id"]), "--name", "Ops"
    )
    return int(created["id"])


def load(settings: Settings, workspace: int, path: Path, *options: str) -> tuple[int, Any]:
    return run(
        settings, "admin", "load", "--workspace", str(workspace), "--name", "s", *options, str(path)
    )


def test_load_reads_the_file_in_the_given_encoding(
    settings: Settings, api: httpx.Client, workspace: int, tmp_path: Path
) -> None:
    path = tmp_path / "cp1252.csv"
    path.write_bytes(CP1252_CSV)
    code, loaded = load(settings, workspace, path, "--encoding", "cp1252")
    assert code == 0, loaded
    assert loaded["rows"] == 2
    key = ok(settings, "admin", "create-key", "--workspace", str(workspace))["key"]
    response = api.get(
        f"/api/v1/resources/{loaded['id']}/data",
        headers={"X-API-Key": key, "workspace_id": str(workspace)},
    )
    assert response.status_code == 200, response.text
    assert json.loads(response.content, parse_float=Decimal)["data"] == [
        {"id": 1, "memo": "€ 5 \u2013 Œuvre", "amount": Decimal("1.50")},
        {"id": 2, "memo": "café", "amount": Decimal("-2.00")},
    ]


def test_load_of_a_file_not_valid_utf8_fails_naming_line_and_offset(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    path = tmp_path / "mixed.csv"
    path.write_bytes(MIXED)
    code, refused = load(settings, workspace, path)
    assert code == 1, refused
    assert refused["kind"] == "LoadError"
    assert refused["line"] == 3
    assert "byte offset 21" in refused["error"]
    assert source_count(settings) == 0


def test_load_with_an_unknown_encoding_is_refused_naming_it(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    path = tmp_path / "plain.csv"
    path.write_bytes(b"a,b\n1,2\n")
    code, refused = load(settings, workspace, path, "--encoding", "klingon")
    assert code == 1, refused
    assert refused["kind"] == "DefinitionRejectedError"
    assert refused["error"].startswith("encoding: ")
    assert "klingon" in refused["error"]
    assert source_count(settings) == 0


def test_help_documents_the_encoding_option() -> None:
    result = CliRunner().invoke(app, ["admin", "load", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--encoding" in result.stdout
    assert "utf-8" in result.stdout.lower()
