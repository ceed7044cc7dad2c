"""docs/glossary.md holds: a retired word does not come back in a module's name or a
setting's, and the glossary names each word once.

"Notification" is the inbound webhook call alone: a module or setting named for it is
one of the inbound side's, listed here; the outbound side is a status callback. A
definition's JSON is its body, never its shape."""

from __future__ import annotations

import re
from pathlib import Path

from tally.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "tally"
GLOSSARY = ROOT / "docs" / "glossary.md"

# The inbound side's names: the spec's notification endpoint and what it queues.
INBOUND_MODULES = {"notification_intake", "notified_files", "notified_groups"}
INBOUND_SETTINGS = {"max_notification_bytes"}
RETIRED = re.compile(r"shape|notif")


def module_names() -> list[str]:
    """Every module and package of tally, migrations aside (their names record history)."""
    migrations = PACKAGE / "storage" / "migrations"
    return [
        path.stem if path.suffix == ".py" else path.name
        for path in PACKAGE.rglob("*")
        if "__pycache__" not in path.parts
        and migrations not in path.parents
        and (path.suffix == ".py" or path.is_dir())
    ]


def test_no_module_is_named_for_a_retired_word() -> None:
    names = module_names()
    assert {"bodies", "status_callbacks"} <= set(names)  # the scan sees the tree
    assert [n for n in names if RETIRED.search(n) and n not in INBOUND_MODULES] == []


def test_no_setting_is_named_for_a_retired_word() -> None:
    fields = set(Settings.model_fields)
    assert {"callback_retry_schedule", "callback_timeout_seconds"} <= fields
    assert [f for f in fields if RETIRED.search(f) and f not in INBOUND_SETTINGS] == []


def test_the_glossary_names_each_word_once() -> None:
    words = re.findall(r"^- \*\*(.+?)\*\*:", GLOSSARY.read_text(), re.M)
    assert {"status callback", "notification", "body"} <= set(words)
    assert sorted(w for w in set(words) if words.count(w) > 1) == []
