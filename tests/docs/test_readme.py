"""README.md and docs stay true: the configuration tables, the two commands, CI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tally.settings import settings_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("document", ["README.md", "docs/configuration.md"])
def test_configuration_table_matches_settings(document: str) -> None:
    text = (ROOT / document).read_text()
    start = text.index("<!-- settings-table -->\n") + len("<!-- settings-table -->\n")
    end = text.index("<!-- /settings-table -->")
    assert text[start:end] == settings_table()


def test_set_up_gives_exactly_two_commands() -> None:
    section = README.split("## Set up", 1)[1].split("##", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert [c for c in commands if c] == ["scripts/serve --demo", "scripts/test"]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test" in ci.split("\n", 3)[-1]
    for script in ("serve", "test", "bootstrap", "check"):
        assert (ROOT / "scripts" / script).stat().st_mode & 0o111


def test_examples_take_ids_from_demo_env_or_answers() -> None:
    """An id written into a path holds for one demo only: a second `--demo` has others."""
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    paths = r"/(?:sources|resources|reconciliations|transformations|webhooks|files)/[0-9]+"
    assert [m for block in blocks for m in re.findall(paths, block)] == []
