"""Settings: every knob tally has, read from TALLY_* environment variables.

Built once by `load_settings()` in an entry point and passed down as values; nothing
imports a global settings object. docs/configuration.md is generated from this class.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from tally.core import limits, sql_limits, users
from tally.core.names import http_url_problem


def _renamed(name: str, *former: str) -> AliasChoices:
    """A renamed setting's variables: its own, then its former names, still read but
    deprecated (settings_table lists them); `Settings(name=...)` keeps working."""
    return AliasChoices(*(f"TALLY_{n.upper()}" for n in (name, *former)))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TALLY_", extra="ignore", populate_by_name=True)

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
    database_pool_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="Longest a request or a job waits for one of its process's database "
        "connections while every one is in use; then it is refused: 503 with Retry-After.",
    )
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
    query_processes: int | None = Field(
        None,
        ge=0,
        description="Processes per API process that run Data API queries (unset: the "
        "CPUs divided among the API processes; 0: in the API process's threads).",
    )
    snapshot_min_rows: int = Field(
        50_000,
        ge=0,
        description="Resources with at least this many rows get column snapshots: "
        "filtered counts and pages of any filter set answered from memory (decision 0014).",
    )
    snapshot_memory_mb: int = Field(
        256,
        ge=0,
        description="Memory each query process may give column snapshots (least recently "
        "used dropped first; ~115 MB a 1M-row, ten-column resource); 0 turns them off.",
    )
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
    max_file_bytes: int = Field(
        limits.DEFAULT_MAX_FILE_BYTES,
        description="Largest file a download or upload may bring, and largest a gzip file "
        "may expand to.",
    )
    max_compression_ratio: float = Field(
        limits.DEFAULT_MAX_COMPRESSION_RATIO,
        gt=1,
        description="A gzip file may expand at most this many times (judged once 8 MiB "
        "came out): a bomb fails within its first megabytes.",
    )
    max_columns: int = Field(
        limits.DEFAULT_MAX_COLUMNS,
        ge=1,
        description="Most columns a file may have (SQLite's own limit is 2,000, "
        "PostgreSQL's 1,600: past them, files fail with 'the database refused the table').",
    )
    max_header_bytes: int = Field(
        limits.DEFAULT_MAX_HEADER_BYTES,
        ge=1,
        description="Longest header line of a file, in bytes of its text in UTF-8.",
    )
    max_line_bytes: int = Field(
        limits.DEFAULT_MAX_LINE_BYTES,
        ge=1,
        description="Longest line of a file, in bytes of its text in UTF-8 (a UTF-8 file's "
        "bytes as stored).",
    )
    max_cell_bytes: int = Field(
        limits.DEFAULT_MAX_CELL_BYTES, ge=1, description="Longest value of a file, in characters."
    )
    fetch_connect_timeout_seconds: float = Field(10.0, description="Download connect time-out.")
    fetch_read_timeout_seconds: float = Field(60.0, description="Download read time-out.")
    fetch_total_timeout_seconds: float = Field(
        1800.0, description="Longest time one download attempt may take."
    )
    fetch_max_redirects: int = Field(3, description="Redirects followed per download.")
    delivery_deadline_seconds: float = Field(
        86400.0, description="How long a file is retried after transient failures."
    )
    delivery_max_attempts: int = Field(
        5,
        ge=1,
        description="Attempts a file is given, whatever ended them (a failed download, a "
        "crash, a stopped worker); then it fails.",
    )
    retry_base_seconds: float = Field(
        2.0, description="First retry delay; doubles each attempt (with jitter)."
    )
    retry_max_seconds: float = Field(600.0, description="Longest delay between retries.")
    lease_seconds: float = Field(
        60.0,
        description="A claimed job is taken up by another worker this long after "
        "its worker stops renewing it.",
    )
    worker_concurrency: int = Field(2, ge=1, description="Jobs a worker process runs at once.")
    load_rate_while_accepting: float = Field(
        12.0,
        ge=0,
        description="MiB a second of file text a worker process's loads send to "
        "PostgreSQL's COPY, together, while notifications are being accepted (files "
        "queued by any process within the last second): every commit of the API's then "
        "waits for less of COPY's log. At full speed otherwise; 0 never paces "
        "(decision 0022). SQLite's loads are not paced.",
    )
    worker_niceness: int = Field(
        10,
        ge=0,
        le=19,
        description="CPU niceness `tally worker` runs at (0-19, Linux `nice`): when the "
        "machine is busy, the API's requests get the CPU before loads and runs do; an "
        "idle machine gives the worker all of it. Never lowered below what the process "
        "was started with; `tally serve`'s own worker shares the API's process and is "
        "not reniced.",
    )
    worker_poll_seconds: float = Field(
        0.5,
        description="Idle worker's polling interval (queued files also wake workers at "
        "once: on PostgreSQL every worker, on SQLite `tally serve`'s own).",
    )
    serve_worker: bool = Field(
        True, description="`tally serve` also runs a worker in the same process."
    )
    derived_burst_seconds: float = Field(
        0.25,
        description="A change to an input (a delivery, a refreshed output) queues a run of "
        "each reconciliation and transformation reading it this much later, so a burst of "
        "changes runs each once; changes during a run queue one run after it.",
    )
    derived_max_attempts: int = Field(
        3,
        ge=1,
        description="Runs of a reconciliation that fail in a row (retried after "
        "TALLY_RETRY_BASE_SECONDS, doubling) before its state is `failed`.",
    )
    derived_wait_seconds: float = Field(
        600.0,
        description="Longest `tally admin run-reconciliation` waits for a run another "
        "worker is doing.",
    )
    transformation_timeout_seconds: float = Field(
        60.0,
        gt=0,
        description="Longest a transformation's query may run (a run or a preview); a run "
        "past it fails and the previous output stays readable.",
    )
    transformation_max_rows: int = Field(
        10_000_000,
        ge=1,
        description="Most rows a transformation's output may hold; a run past it fails "
        "and the previous output stays readable.",
    )
    preview_concurrency: int = Field(
        4,
        ge=1,
        description="Transformation previews one API process runs at once, each on a "
        "thread and a database connection of its own (never the event loop's, the other "
        "requests' or the notification intake's); one more is refused at once: 503 with "
        "Retry-After.",
    )
    preview_workspace_concurrency: int = Field(
        2,
        ge=1,
        description="Previews of one workspace an API process runs at once; one more is "
        "refused at once: 429 with Retry-After.",
    )
    transformation_max_sql_bytes: int = Field(
        sql_limits.DEFAULT_MAX_SQL_BYTES,
        ge=1,
        description="Longest SQL a transformation may have, in bytes of UTF-8 (the API "
        "takes at most 100,000 characters anyway); 3,000 CTEs, 91 KB, took 660 MB and 10 s "
        "to preview before this limit and those below (docs/transformations.md).",
    )
    transformation_max_nesting: int = Field(
        sql_limits.DEFAULT_MAX_NESTING,
        ge=1,
        description="Deepest a transformation's SQL may nest parentheses, CASEs and prefix "
        "operators (NOT, -), counted before it is parsed: the parser recursed past "
        "Python's limit at ~41.",
    )
    transformation_max_depth: int = Field(
        sql_limits.DEFAULT_MAX_DEPTH,
        ge=1,
        description="Deepest a transformation's parsed SQL may be, each operator of a chain "
        "a level (`a || b || ...` of 162 terms overflowed the SQL writer's recursion).",
    )
    transformation_max_terms: int = Field(
        sql_limits.DEFAULT_MAX_TERMS,
        ge=1,
        description="Most terms (names, values, operators) a transformation's SQL may have, "
        "counted before it is parsed and once `*` is expanded.",
    )
    transformation_max_ctes: int = Field(
        sql_limits.DEFAULT_MAX_CTES,
        ge=0,
        description="Most CTEs (`WITH` queries) a transformation's SQL may have.",
    )
    callback_retry_schedule: str = Field(
        "5,300,1800,7200,18000,36000,36000",
        validation_alias=_renamed("callback_retry_schedule", "notification_retry_schedule"),
        description="Seconds between a status callback's attempts (comma-separated): "
        "the default spans more than 24 hours.",
    )
    callback_timeout_seconds: float = Field(
        15.0,
        validation_alias=_renamed("callback_timeout_seconds", "notification_timeout_seconds"),
        description="Time-out of one status callback's attempt.",
    )
    max_notification_bytes: int = Field(
        65536, description="Largest webhook notification body accepted."
    )
    public_url: str = Field(
        "http://127.0.0.1:8000",
        description="The address people open the console at (scheme, host, port: behind a "
        "proxy, the proxy's): the host of the invite URLs `tally admin create-user` prints, "
        "and, when https, the session cookie is sent over https only. Default: where "
        "`tally serve` listens by default.",
    )
    session_idle_minutes: float = Field(
        users.DEFAULT_SESSION_IDLE_MINUTES,
        gt=0,
        description="A console session ends after this many minutes without a request.",
    )
    session_max_hours: float = Field(
        users.DEFAULT_SESSION_MAX_HOURS,
        gt=0,
        description="A console session ends this many hours after sign-in, however busy.",
    )
    sign_in_max_failures: int = Field(
        users.DEFAULT_SIGN_IN_MAX_FAILURES,
        ge=1,
        description="Wrong passwords in a row for one username before it is locked "
        "(known or not: the lock tells nobody which usernames exist).",
    )
    sign_in_lock_minutes: float = Field(
        users.DEFAULT_SIGN_IN_LOCK_MINUTES,
        gt=0,
        description="How long a locked username is refused, even with the right password.",
    )
    log_level: str = Field(
        "INFO",
        description="Python logging level. Each line on stderr reads `time level logger "
        "event key=value ...`: the event, then its context (`file_id`, `derived_id`, a "
        "run's `seconds` per phase), keys and webhook ids blanked.",
    )

    @field_validator("public_url")
    @classmethod
    def _public_url_is_an_http_url(cls, value: str) -> str:
        """An invite URL is built on it: a typo fails at start, not in a user's browser."""
        if (problem := http_url_problem(value)) is not None:
            raise ValueError(f"TALLY_PUBLIC_URL {problem}: {value!r}")
        return value.rstrip("/")

    @property
    def sqlite_path(self) -> Path:
        return self.home / "tally.db"

    @property
    def blob_dir(self) -> Path:
        return self.home / "files"

    @property
    def secret_key_path(self) -> Path:
        return self.home / "secret.key"

    def retry_schedule(self) -> tuple[float, ...]:
        return tuple(
            float(part) for part in self.callback_retry_schedule.split(",") if part.strip()
        )

    def effective_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.sqlite_path.resolve()}"


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]


def settings_table() -> str:
    """The configuration table of README.md and docs/configuration.md (kept in sync by a
    test): one row per setting, its variable, default and description."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, info in Settings.model_fields.items():
        default = info.default
        shown = "unset" if default is None else str(default)
        lines.append(f"| `TALLY_{name.upper()}` | `{shown}` | {info.description}{_former(info)} |")
    return "\n".join(lines) + "\n"


def _former(info: FieldInfo) -> str:
    """A renamed setting's former variables, as the table says them."""
    alias = info.validation_alias
    if not isinstance(alias, AliasChoices):
        return ""
    former = [f"`{choice}`" for choice in alias.choices[1:]]
    return f" Deprecated: {', '.join(former)}, still read." if former else ""
