"""`tally admin create-user | reset-user | disable-user | list-users`: one JSON object
each, errors as {"error", "kind"} with exit 1. On both backends."""

from __future__ import annotations

from typing import Any

import pytest

from support.cli import tally
from tally.settings import Settings

PASSWORD = "correct horse battery"


def ok(settings: Settings, *args: str) -> dict[str, Any]:
    code, printed = tally(settings, "admin", *args)
    assert code == 0, printed
    return printed


def failed(settings: Settings, *args: str) -> dict[str, Any]:
    code, printed = tally(settings, "admin", *args)
    assert code == 1, printed
    assert set(printed) == {"error", "kind"}
    return printed


@pytest.fixture
def workspace(settings: Settings) -> int:
    account = ok(settings, "create-account", "--name", "Acme Treasury")
    return int(
        ok(settings, "create-workspace", "--account", str(account["id"]), "--name", "Ops")["id"]
    )


def test_create_user_prints_the_user_and_an_invite_url(settings: Settings, workspace: int) -> None:
    printed = ok(
        settings, "create-user", "--workspace", str(workspace), "--name", "alice", "--role", "admin"
    )
    assert {"id", "name", "workspace_id", "role", "invite_url"} <= set(printed)
    assert (printed["name"], printed["workspace_id"], printed["role"]) == (
        "alice",
        workspace,
        "admin",
    )
    # TALLY_PUBLIC_URL's default: where `tally serve` listens by default
    assert printed["invite_url"].startswith("http://127.0.0.1:8000/console/invite/")
    assert printed["has_password"] is False


def test_the_invite_url_takes_tally_public_url(
    settings: Settings, workspace: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TALLY_PUBLIC_URL", "https://tally.acme.example/")
    printed = ok(
        settings, "create-user", "--workspace", str(workspace), "--name", "bob", "--role", "viewer"
    )
    assert printed["invite_url"].startswith("https://tally.acme.example/console/invite/")


def test_reset_prints_a_new_invite_url_and_disable_and_list(
    settings: Settings, workspace: int
) -> None:
    created = ok(
        settings,
        "create-user",
        "--workspace",
        str(workspace),
        "--name",
        "carol",
        "--role",
        "analyst",
    )
    reset = ok(settings, "reset-user", "--id", str(created["id"]))
    assert reset["id"] == created["id"]
    assert reset["invite_url"] != created["invite_url"]
    disabled = ok(settings, "disable-user", "--id", str(created["id"]))
    assert disabled["disabled"] is True
    assert "invite_url" not in disabled
    listed = ok(settings, "list-users", "--workspace", str(workspace))
    assert listed["workspace_id"] == workspace
    assert [(u["name"], u["role"], u["disabled"]) for u in listed["users"]] == [
        ("carol", "analyst", True)
    ]
    assert "invite_url" not in listed["users"][0]


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["reset-user", "--id", "4242"], "UserNotFoundError"),
        (["disable-user", "--id", "4242"], "UserNotFoundError"),
        (["list-users", "--workspace", "4242"], "WorkspaceNotFoundError"),
        (
            ["create-user", "--workspace", "4242", "--name", "x", "--role", "viewer"],
            "WorkspaceNotFoundError",
        ),
        (
            ["create-user", "--workspace", "{ws}", "--name", "x", "--role", "owner"],
            "DefinitionRejectedError",
        ),
        (["create-user", "--workspace", "{ws}", "--name", "x"], "UsageError"),
    ],
)
def test_errors_are_one_json_object_and_exit_1(
    settings: Settings, workspace: int, args: list[str], kind: str
) -> None:
    printed = failed(settings, *[a.format(ws=workspace) for a in args])
    assert printed["kind"] == kind


def test_a_taken_name_is_refused(settings: Settings, workspace: int) -> None:
    args = ["create-user", "--workspace", str(workspace), "--name", "dan", "--role", "viewer"]
    ok(settings, *args)
    assert "already exists" in failed(settings, *args)["error"]
