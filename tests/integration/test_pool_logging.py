"""tally's pool class (storage/db_errors.BusyQueuePool) logs as quietly as SQLAlchemy's
own: its logger is named after the class, below `tally`, where INFO is on, and `tally
serve` printed "Pool disposed" and "Pool recreating" for every pool when it stopped."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tally.storage.engine import create_database_engine


def test_a_pool_says_nothing_at_info_when_disposed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = create_database_engine(f"sqlite:///{tmp_path / 'tally.db'}", pool_size=1)
    with caplog.at_level(logging.INFO, logger="tally"):
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
    assert [r.getMessage() for r in caplog.records if "Pool" in r.name] == []
