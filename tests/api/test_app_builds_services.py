"""The server builds every service when its app is made, before its lifespan settles
the collector (decision 0007): no request pays an import, and what requests use is among
the frozen start-up objects. A command of `tally admin` builds only its own
(tests/cli/test_startup_imports.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.databases import make_settings
from tally.api.app import create_app
from tally.runtime import Runtime, build_runtime


def test_making_the_app_builds_every_service(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    settings = make_settings(request, backend, tmp_path / "home")
    runtime = build_runtime(settings)
    try:
        parts = [
            name for name, part in vars(Runtime).items() if type(part).__name__ == "_BuiltOnce"
        ]
        assert parts
        assert not set(parts) & set(vars(runtime))  # nothing built yet
        create_app(settings, runtime)
        assert set(parts) <= set(vars(runtime))
    finally:
        runtime.close()
