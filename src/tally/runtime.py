"""The composition root: builds the engine and services from Settings, once per process.

Entry points (api, cli, worker) reach storage only through what is wired here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine

from tally.services.data_query import DataQueryService
from tally.settings import Settings
from tally.storage.engine import backend_of, create_database_engine
from tally.storage.migrate import upgrade_database


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    data_query: DataQueryService

    @property
    def backend_name(self) -> str:
        return backend_of(self.engine).name

    def close(self) -> None:
        self.engine.dispose()


def build_runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    settings.home.mkdir(parents=True, exist_ok=True)
    engine = create_database_engine(
        settings.effective_database_url(), pool_size=settings.database_pool_size
    )
    if migrate:
        upgrade_database(engine)
    data_query = DataQueryService(
        engine,
        cache_seconds=settings.response_cache_seconds if settings.response_cache else None,
        cache_entries=settings.response_cache_max_entries,
    )
    return Runtime(settings, engine, data_query)
