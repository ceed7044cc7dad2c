"""`tally admin ...`, the onboarding contract: external test suites drive these commands
and read the one JSON object each prints on stdout. On both backends."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import typer

from support.cli import cli_env, tally
from tally.cli.main import app
from tally.core.ids import hash_secret
from tally.core.names import NAME_MAX_CHARS
from tally.settings import Settings
from tally.storage.schema import accounts, resources, workspaces

CSV = "id,amount,booked_on\n1,10.50,2024-01-31\n2,-3.25,2024-02-01\n"


def ok(settings: Settings, *args: str, stdin: str | None = None) -> dict[str, Any]:
    code, printed = tally(settings, *args, stdin=stdin)
    assert code == 0, printed
    return printed


def failed(settings: Settings, *args: str, stdin: str | None = None) -> dict[str, Any]:
    code, printed = tally(settings, *args, stdin=stdin)
    assert code == 1, printed
    assert set(printed) >= {"error", "kind"}
    return printed


def _count(settings: Settings, table: sa.Table) -> int:
    engine = sa.create_engine(settings.database_url or f"sqlite:///{settings.home / 'tally.db'}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
    finally:
        engine.dispose()


@pytest.fixture
def workspace(settings: Settings) -> int:
    account = ok(settings, "admin", "create-account", "--name", "Acme Treasury")
    created = ok(
        settings, "admin", "create-workspace", "--account", str(account["id"]), "--name", "Ops"
    )
    return int(created["id"])


def load(workspace: int | str, name: str, path: Path | str) -> list[str]:
    """The arguments of `tally admin load`."""
    return ["admin", "load", "--workspace", str(workspace), "--name", name, str(path)]


def _csv(tmp_path: Path, content: str = CSV, name: str = "payments.csv") -> Path:
    path = tmp_path / name
    path.write_text(content)
    return path


def _read(api: httpx.Client, key: str, workspace: int, resource: int) -> httpx.Response:
    return api.get(
        f"/api/v1/resources/{resource}/data",
        headers={"X-API-Key": key, "workspace_id": str(workspace)},
    )


def test_onboarding_prints_the_contracted_objects_and_the_key_reads_the_loaded_rows(
    settings: Settings, api: httpx.Client, tmp_path: Path
) -> None:
    account = ok(
        settings,
        "admin",
        "create-account",
        "--name",
        "Acme",
        "--allowed-origin",
        "https://ops.acme.example",
    )
    assert set(account) == {"id", "name"}
    assert isinstance(account["id"], int)
    assert account["name"] == "Acme"

    plain = ok(
        settings, "admin", "create-workspace", "--account", str(account["id"]), "--name", "Ops"
    )
    assert plain == {
        "id": plain["id"],
        "account_id": account["id"],
        "name": "Ops",
        "ingestion_enabled": False,
    }
    fed = ok(
        settings,
        "admin",
        "create-workspace",
        "--account",
        str(account["id"]),
        "--name",
        "Feeds",
        "--ingestion",
    )
    assert fed["ingestion_enabled"] is True
    assert ok(settings, "admin", "enable-ingestion", "--workspace", str(plain["id"])) == {
        "id": plain["id"],
        "ingestion_enabled": True,
    }

    issued = ok(settings, "admin", "create-key", "--workspace", str(plain["id"]))
    assert set(issued) == {"key", "workspace_id"}
    assert issued["workspace_id"] == plain["id"]
    assert issued["key"].startswith("tly_")

    loaded = ok(settings, *load(plain["id"], "bank.payments", str(_csv(tmp_path))))
    assert loaded == {"id": loaded["id"], "name": "bank.payments", "rows": 2}

    response = _read(api, issued["key"], plain["id"], loaded["id"])
    assert response.status_code == 200, response.text
    assert response.json()["data"] == [
        {"id": 1, "amount": 10.50, "booked_on": "2024-01-31"},
        {"id": 2, "amount": -3.25, "booked_on": "2024-02-01"},
    ]
    assert '"amount":10.50' in response.text  # the decimal's digits, as in the file


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "name: must not be blank"),
        ("   ", "name: must not be blank"),
        ("x" * (NAME_MAX_CHARS + 1), f"name: must be at most {NAME_MAX_CHARS} characters"),
        ("tab\there", "name: must not contain control characters"),
        ("nul\x00", "name: must not contain control characters"),
    ],
)
def test_bad_names_are_refused_by_every_command_that_names_something(
    settings: Settings, workspace: int, tmp_path: Path, name: str, problem: str
) -> None:
    before = (_count(settings, accounts), _count(settings, workspaces), _count(settings, resources))
    assert failed(settings, "admin", "create-account", "--name", name)["error"] == problem
    assert (
        failed(settings, "admin", "create-workspace", "--account", "1", "--name", name)["error"]
        == problem
    )
    refused = failed(settings, *load(workspace, name, str(_csv(tmp_path))))
    assert refused == {"error": problem, "kind": "DefinitionRejectedError"}
    after = (_count(settings, accounts), _count(settings, workspaces), _count(settings, resources))
    assert after == before


def test_a_name_of_the_longest_length_is_kept_whole(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    name = "é" * NAME_MAX_CHARS  # characters, not bytes
    assert ok(settings, "admin", "create-account", "--name", name)["name"] == name
    loaded = ok(settings, *load(workspace, name, str(_csv(tmp_path))))
    assert loaded["name"] == name


def test_unknown_ids_are_errors_naming_what_is_missing(settings: Settings, tmp_path: Path) -> None:
    assert failed(settings, "admin", "create-workspace", "--account", "4242", "--name", "W") == {
        "error": "Account not found",
        "kind": "AccountNotFoundError",
    }
    missing = {"error": "Workspace not found", "kind": "WorkspaceNotFoundError"}
    assert failed(settings, "admin", "enable-ingestion", "--workspace", "4242") == missing
    assert failed(settings, "admin", "create-key", "--workspace", "4242") == missing
    assert failed(settings, "admin", "list-keys", "--workspace", "4242") == missing
    assert failed(settings, *load(4242, "s", str(_csv(tmp_path)))) == missing
    # Beyond any id the database can hold: still "not found", never a crash.
    assert failed(settings, "admin", "create-key", "--workspace", str(2**63)) == missing


def test_allowed_origins_are_kept_as_browsers_send_them(
    settings: Settings, api: httpx.Client
) -> None:
    account = ok(
        settings,
        "admin",
        "create-account",
        "--name",
        "Web",
        "--allowed-origin",
        "HTTPS://Ops.Acme.Example:443/",
        "--allowed-origin",
        "http://localhost:3000",
    )
    for origin in ("https://ops.acme.example", "http://localhost:3000"):
        preflight = api.options(
            "/api/v2/webhook",
            headers={"Origin": origin, "Access-Control-Request-Method": "POST"},
        )
        assert preflight.headers.get("access-control-allow-origin") == origin, account


@pytest.mark.parametrize(
    "origin",
    [
        "ops.acme.example",
        "https://ops.acme.example/app",
        "ftp://ops.acme.example",
        "*",
        "https://u:p@ops.acme.example",
    ],
)
def test_a_value_that_is_not_an_origin_is_refused_and_creates_nothing(
    settings: Settings, origin: str
) -> None:
    before = _count(settings, accounts)
    refused = failed(
        settings,
        "admin",
        "create-account",
        "--name",
        "Web",
        "--allowed-origin",
        "https://fine.example",
        "--allowed-origin",
        origin,
    )
    assert refused["kind"] == "DefinitionRejectedError"
    assert refused["error"].startswith(f"allowed_origin: {origin!r} is not an origin")
    assert _count(settings, accounts) == before


def test_a_bad_file_loads_nothing_and_names_its_line(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    bad = _csv(tmp_path, "id,amount\n1,2.50\n2,not money\n3\n", "bad.csv")
    refused = failed(settings, *load(workspace, "payments", str(bad)))
    assert refused["kind"] in {"LoadError", "SchemaMismatchError"}
    assert refused["line"] == 4
    assert "line 4" in refused["error"]
    assert _count(settings, resources) == 0
    # The name is free: nothing of the refused load was kept.
    loaded = ok(settings, *load(workspace, "payments", str(_csv(tmp_path))))
    assert loaded["rows"] == 2


def test_loading_under_a_taken_name_or_from_no_file_is_refused(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    path = str(_csv(tmp_path))
    ok(settings, *load(workspace, "payments", path))
    assert failed(settings, *load(workspace, "payments", path)) == {
        "error": "name: a source named 'payments' already exists",
        "kind": "DefinitionRejectedError",
    }
    missing = str(tmp_path / "missing.csv")
    assert failed(settings, *load(workspace, "other", missing)) == {
        "error": f"cannot read {missing!r}: No such file or directory",
        "kind": "LoadError",
    }
    directory = failed(settings, *load(workspace, "other", str(tmp_path)))
    assert directory["error"].startswith(f"cannot read {str(tmp_path)!r}")
    assert _count(settings, resources) == 1


def test_keys_are_listed_by_fingerprint_and_revoked_at_once(
    settings: Settings, api: httpx.Client, workspace: int, tmp_path: Path
) -> None:
    first = ok(settings, "admin", "create-key", "--workspace", str(workspace))["key"]
    second = ok(settings, "admin", "create-key", "--workspace", str(workspace))["key"]
    resource = ok(settings, *load(workspace, "p", str(_csv(tmp_path))))["id"]
    assert _read(api, first, workspace, resource).status_code == 200

    listed = ok(settings, "admin", "list-keys", "--workspace", str(workspace))
    assert listed["workspace_id"] == workspace
    assert [k["fingerprint"] for k in listed["keys"]] == [
        f"sha256:{hash_secret(first)[:12]}",
        f"sha256:{hash_secret(second)[:12]}",
    ]
    assert all(
        k["revoked_at"] is None and k["created_at"].endswith("+00:00") for k in listed["keys"]
    )

    revoked = ok(settings, "admin", "revoke-key", stdin=f"{first}\n")
    assert revoked["id"] == listed["keys"][0]["id"]
    assert revoked["revoked_at"].endswith("+00:00")
    assert _read(api, first, workspace, resource).status_code == 401
    assert _read(api, second, workspace, resource).status_code == 200
    # Once more: nothing changes, the first revocation time is kept.
    assert ok(settings, "admin", "revoke-key", stdin=f"{first}\n") == revoked

    by_id = ok(settings, "admin", "revoke-key", "--id", str(listed["keys"][1]["id"]))
    assert by_id["fingerprint"] == listed["keys"][1]["fingerprint"]
    assert _read(api, second, workspace, resource).status_code == 401
    after = ok(settings, "admin", "list-keys", "--workspace", str(workspace))
    assert [k["revoked_at"] for k in after["keys"]] == [revoked["revoked_at"], by_id["revoked_at"]]

    for printed in (listed, revoked, by_id, after):
        assert first not in json.dumps(printed)
        assert second not in json.dumps(printed)


def test_revoking_a_key_that_does_not_exist_is_an_error(settings: Settings, workspace: int) -> None:
    not_found = {"error": "API key not found", "kind": "ApiKeyNotFoundError"}
    assert failed(settings, "admin", "revoke-key", stdin="tly_not-a-key\n") == not_found
    assert failed(settings, "admin", "revoke-key", stdin="\n") == not_found
    assert failed(settings, "admin", "revoke-key", "--id", "4242") == not_found
    assert failed(settings, "admin", "revoke-key", "--id", str(2**63)) == not_found


def test_a_large_load_draws_its_progress_on_stderr_and_prints_one_object(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    """The real command, its stderr a terminal: the bar is drawn there, stdout stays the
    one JSON object a script reads."""
    rows = 170_000  # ~8.8 MB: over the size from which a bar is drawn
    path = tmp_path / "large.csv"
    with path.open("w") as out:
        out.write("id,amount,memo\n")
        out.writelines(
            f"{n},{n}.25,payment number {n} of the quarter\n" for n in range(1, rows + 1)
        )
    assert path.stat().st_size > 8 * 1024 * 1024
    terminal, stderr = pty.openpty()
    env = {**os.environ, **cli_env(settings), "COLUMNS": "100"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tally",
            "admin",
            "load",
            "--workspace",
            str(workspace),
            "--name",
            "large",
            str(path),
        ],
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env,
    )
    os.close(stderr)
    drawn = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    stdout, _ = process.communicate(timeout=120)
    os.close(terminal)
    assert process.returncode == 0, drawn.decode(errors="replace")
    assert json.loads(stdout) == {"id": 1, "name": "large", "rows": rows}
    assert stdout.count(b"\n") == 1
    assert b"loading" in drawn or b"checking" in drawn


def test_the_installed_command_exits_1_with_the_error_object(settings: Settings) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tally", "admin", "create-key", "--workspace", "4242"],
        capture_output=True,
        env={**os.environ, **cli_env(settings)},
        timeout=60,
    )
    assert done.returncode == 1
    assert json.loads(done.stdout) == {
        "error": "Workspace not found",
        "kind": "WorkspaceNotFoundError",
    }


def test_every_admin_command_has_a_help_text() -> None:
    admin = typer.main.get_group(app).commands["admin"]
    assert isinstance(admin, typer.core.TyperGroup)
    helps = {name: command.help for name, command in admin.commands.items()}
    assert {"create-account", "create-workspace", "enable-ingestion"} <= set(helps)
    assert all(text and text.strip() for text in helps.values()), helps
