"""Settings: every knob tally has, read from TALLY_* environment variables.

Built once by `load_settings()` in an entry point and passed down as values; nothing
imports a global settings object. docs/configuration.md is generated from this class.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TALLY_", extra="ignore")

    home: Path = Field(
        Path(".tally"),
        description="Folder for the embedded database (tally.db) and downloaded files.",
    )
    database_url: str | None = Field(
        None,
        description="postgresql://user:pass@host:port/db to use PostgreSQL; "
        "unset: SQLite in TALLY_HOME.",
    )
    database_pool_size: int = Field(10, description="Connections kept open per process.")
    response_cache: bool = Field(
        True, description="Serve identical Data API requests from an in-process cache."
    )
    response_cache_seconds: int = Field(300, description="Lifetime of a cached response.")
    response_cache_max_entries: int = Field(
        2048, description="Responses kept per process before the oldest are dropped."
    )
    gzip_min_bytes: int = Field(1000, description="Responses above this size are gzipped.")
    gzip_level: int = Field(
        1, ge=1, le=9, description="gzip level: 1 is fastest; JSON still shrinks ~8x."
    )
    web_concurrency: int = Field(1, ge=1, description="API processes started by `tally serve`.")
    secret_key: SecretStr | None = Field(
        None,
        description="Key that encrypts stored download credentials "
        "(default: generated once into TALLY_HOME/secret.key).",
    )
    fetch_allow: str = Field(
        "",
        description="Comma-separated networks downloads may reach despite the SSRF guard, "
        "e.g. 127.0.0.0/8 for tests or on-premises file servers.",
    )
    log_level: str = Field("INFO", description="Python logging level.")

    @property
    def sqlite_path(self) -> Path:
        return self.home / "tally.db"

    @property
    def blob_dir(self) -> Path:
        return self.home / "files"

    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.sqlite_path.resolve()}"


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]
