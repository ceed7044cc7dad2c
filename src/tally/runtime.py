"""The composition root: builds the engine and every service from Settings, once per
process (procrastinate's `App(connector=...)`).

Entry points (api, cli, worker) get their services here; they never import storage, net
or sqlalchemy (import-linter's contract in pyproject.toml). `engine` stays visible for
the query processes' wiring and for tests that look at stored rows.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine

from tally.core.limits import MIB, FileLimits
from tally.core.log_lines import ContextFormatter
from tally.core.redaction import SecretRedactor
from tally.core.sealing import SecretBox
from tally.core.sql_limits import SqlLimits
from tally.core.users import SessionPolicy, SignInPolicy
from tally.net.fetch import AddressPolicy, FetchLimits
from tally.services.admin import AdminService
from tally.services.authentication import AuthenticationService
from tally.services.callback_deliveries import CallbackDeliveries
from tally.services.catalogue import SourceCatalogue
from tally.services.column_snapshots import ColumnSnapshots
from tally.services.data_query import DataQueryService
from tally.services.delivery import DeliveryPolicy, DeliveryService
from tally.services.derived.runs import DerivedRuns, RunPolicy
from tally.services.file_loading import FileLoading
from tally.services.files import FileService
from tally.services.loader.pace import LoadPace
from tally.services.notification_intake import NotificationIntake
from tally.services.reconciliation.runs import ReconciliationBuilder
from tally.services.reconciliation.service import ReconciliationService
from tally.services.reconciliation_summary import ReconciliationSummaries
from tally.services.resource_listing import ResourceListing
from tally.services.row_export import RowExport
from tally.services.sources import SourceService
from tally.services.status_callbacks import CallbackSender
from tally.services.transformations.previews import Previews
from tally.services.transformations.runs import RunLimits, TransformationBuilder
from tally.services.transformations.service import TransformationService
from tally.services.uploads import UploadService
from tally.services.users import SessionService, UserService
from tally.services.webhooks import WebhookService
from tally.settings import Settings
from tally.storage.blobs import BlobStore
from tally.storage.engine import backend_of, create_database_engine
from tally.storage.home import open_private, prepare_home, write_private
from tally.storage.migrate import upgrade_database

UVICORN_LOGGERS = ("uvicorn.access", "uvicorn.error")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    engine: Engine
    admin: AdminService
    authentication: AuthenticationService
    catalogue: SourceCatalogue
    data_query: DataQueryService
    delivery: DeliveryService
    derived: DerivedRuns
    files: FileService
    intake: NotificationIntake
    callbacks: CallbackSender
    callback_deliveries: CallbackDeliveries
    previews: Previews
    reconciliations: ReconciliationService
    listing: ResourceListing
    reconciliation_summaries: ReconciliationSummaries
    exports: RowExport
    sources: SourceService
    transformations: TransformationService
    uploads: UploadService
    users: UserService
    sessions: SessionService
    webhooks: WebhookService
    # Pools of their own, so that neither waits for the other or for `engine`'s: the
    # notification intake's one thread, and the previews' (issue #30).
    intake_engine: Engine
    preview_engine: Engine

    @property
    def backend_name(self) -> str:
        return backend_of(self.engine).name

    def write_home_file(self, name: str, text: str) -> Path:
        """A file in TALLY_HOME only its owner may read (demo.env holds an API key)."""
        path = self.settings.home / name
        write_private(path, text.encode())
        return path

    def close(self) -> None:
        self.previews.close()
        self.intake.close()
        if self.data_query.snapshots is not None:
            # A column snapshot still being built holds a connection of this engine.
            self.data_query.snapshots.wait()
        for engine in (self.engine, self.intake_engine, self.preview_engine):
            engine.dispose()


def build_runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    _configure_logging(settings)
    prepare_home(settings.home)
    url = settings.effective_database_url()
    timeout = settings.database_pool_timeout_seconds
    engine = create_database_engine(
        url, pool_size=settings.database_pool_size, pool_timeout=timeout
    )
    # One thread, one connection at a time; the previews hold one each, at most
    # TALLY_PREVIEW_CONCURRENCY at once (Previews refuses more before asking).
    intake_engine = create_database_engine(url, pool_size=1, overflow=False, pool_timeout=timeout)
    preview_engine = create_database_engine(
        url, pool_size=settings.preview_concurrency, overflow=False, pool_timeout=timeout
    )
    if migrate:
        upgrade_database(engine)
    box = secret_box(settings)
    blobs = BlobStore(settings.blob_dir)
    limits = file_limits(settings)
    catalogue = SourceCatalogue(engine, limits=limits, staging_dir=blobs.staging_dir)
    pace = LoadPace(settings.load_rate_while_accepting * MIB)
    loading = FileLoading(engine, limits=limits, staging_dir=blobs.staging_dir, pace=pace)
    policy = delivery_policy(settings)
    run_limits = RunLimits(
        settings.transformation_timeout_seconds,
        settings.transformation_max_rows,
        SqlLimits(
            max_sql_bytes=settings.transformation_max_sql_bytes,
            max_nesting=settings.transformation_max_nesting,
            max_depth=settings.transformation_max_depth,
            max_terms=settings.transformation_max_terms,
            max_ctes=settings.transformation_max_ctes,
        ),
    )
    reconciliations = ReconciliationService(engine)
    listing = ResourceListing(engine)
    return Runtime(
        settings=settings,
        engine=engine,
        admin=AdminService(engine),
        authentication=AuthenticationService(engine),
        catalogue=catalogue,
        data_query=_data_query_service(settings, engine),
        delivery=DeliveryService(engine, box, blobs, policy, catalogue, loading),
        derived=DerivedRuns(
            engine,
            run_policy(settings),
            {
                "reconciliation": ReconciliationBuilder(engine),
                "transformation": TransformationBuilder(engine, run_limits, blobs.staging_dir),
            },
            blobs.staging_dir,
        ),
        files=FileService(engine),
        intake=NotificationIntake(
            intake_engine, box, deadline_seconds=settings.delivery_deadline_seconds
        ),
        callbacks=CallbackSender(
            engine=engine,
            box=box,
            addresses=policy.addresses,
            retry_schedule_seconds=settings.retry_schedule(),
            timeout_seconds=settings.callback_timeout_seconds,
            lease_seconds=policy.lease_seconds,
        ),
        callback_deliveries=CallbackDeliveries(engine),
        previews=Previews(
            preview_engine,
            run_limits,
            total=settings.preview_concurrency,
            per_workspace=settings.preview_workspace_concurrency,
        ),
        reconciliations=reconciliations,
        listing=listing,
        reconciliation_summaries=ReconciliationSummaries(reconciliations, listing),
        exports=RowExport(engine),
        sources=SourceService(engine, box),
        transformations=TransformationService(engine, run_limits),
        uploads=UploadService(
            engine,
            blobs,
            max_file_bytes=settings.max_file_bytes,
            deadline_seconds=settings.delivery_deadline_seconds,
        ),
        users=UserService(engine, public_url=settings.public_url),
        sessions=SessionService(
            engine, sessions=session_policy(settings), sign_in=sign_in_policy(settings)
        ),
        webhooks=WebhookService(engine, box),
        intake_engine=intake_engine,
        preview_engine=preview_engine,
    )


def build_query_process_service(settings: Settings) -> DataQueryService:
    """What a query process needs: its own engine and the Data API service. The API
    process has migrated the database."""
    _configure_logging(settings)
    return _data_query_service(settings, query_process_engine(settings))


def query_process_engine(settings: Settings) -> Engine:
    """One connection (a query process runs one query at a time)."""
    return create_database_engine(settings.effective_database_url(), pool_size=1)


def _configure_logging(settings: Settings) -> None:
    if not logging.getLogger().handlers:  # else the host (a test, an embedding) decides
        handler = logging.StreamHandler()  # stderr, each line with its context
        handler.setFormatter(ContextFormatter(LOG_FORMAT))
        logging.basicConfig(level=settings.log_level.upper(), handlers=[handler])
    # Migration chatter ("Context impl SQLiteImpl") on every start helps nobody.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))
    # No key or webhook id in any line: uvicorn's own loggers (its access log names each
    # path; their handlers are uvicorn's, set up after this), and every handler of ours.
    filtered = [logging.getLogger(name) for name in UVICORN_LOGGERS]
    for target in (*filtered, *logging.getLogger().handlers):
        if not any(isinstance(f, SecretRedactor) for f in target.filters):
            target.addFilter(SecretRedactor())


def _data_query_service(settings: Settings, engine: Engine) -> DataQueryService:
    return DataQueryService(
        engine,
        cache_seconds=settings.response_cache_seconds if settings.response_cache else None,
        cache_entries=settings.response_cache_max_entries,
        snapshots=ColumnSnapshots(
            engine,
            min_rows=settings.snapshot_min_rows,
            memory_bytes=settings.snapshot_memory_mb * 2**20,
        ),
    )


def secret_box(settings: Settings) -> SecretBox:
    """Seals and opens stored secrets with TALLY_SECRET_KEY, else a key generated once
    into TALLY_HOME (single machine)."""
    if settings.secret_key is not None:
        return SecretBox(settings.secret_key.get_secret_value().encode())
    path: Path = settings.secret_key_path
    if not path.exists():
        key = SecretBox.new_key()
        with os.fdopen(open_private(path, exclusive=True), "wb") as handle:
            handle.write(key)
    return SecretBox(path.read_bytes().strip())


def address_policy(settings: Settings) -> AddressPolicy:
    allow = tuple(
        ipaddress.ip_network(part.strip(), strict=False)
        for part in settings.fetch_allow.split(",")
        if part.strip()
    )
    return AddressPolicy(allow=allow)


def file_limits(settings: Settings) -> FileLimits:
    return FileLimits(
        max_file_bytes=settings.max_file_bytes,
        max_compression_ratio=settings.max_compression_ratio,
        max_columns=settings.max_columns,
        max_header_bytes=settings.max_header_bytes,
        max_line_bytes=settings.max_line_bytes,
        max_cell_bytes=settings.max_cell_bytes,
    )


def delivery_policy(settings: Settings) -> DeliveryPolicy:
    return DeliveryPolicy(
        limits=FetchLimits(
            connect_timeout_seconds=settings.fetch_connect_timeout_seconds,
            read_timeout_seconds=settings.fetch_read_timeout_seconds,
            total_timeout_seconds=settings.fetch_total_timeout_seconds,
            max_file_bytes=settings.max_file_bytes,
            max_redirects=settings.fetch_max_redirects,
        ),
        addresses=address_policy(settings),
        deadline_seconds=settings.delivery_deadline_seconds,
        retry_base_seconds=settings.retry_base_seconds,
        retry_max_seconds=settings.retry_max_seconds,
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.delivery_max_attempts,
    )


def run_policy(settings: Settings) -> RunPolicy:
    return RunPolicy(
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.derived_max_attempts,
        retry_base_seconds=settings.retry_base_seconds,
        retry_max_seconds=settings.retry_max_seconds,
        burst_seconds=settings.derived_burst_seconds,
        wait_seconds=settings.derived_wait_seconds,
    )


def session_policy(settings: Settings) -> SessionPolicy:
    return SessionPolicy(
        idle=dt.timedelta(minutes=settings.session_idle_minutes),
        longest=dt.timedelta(hours=settings.session_max_hours),
    )


def sign_in_policy(settings: Settings) -> SignInPolicy:
    return SignInPolicy(
        max_failures=settings.sign_in_max_failures,
        lock=dt.timedelta(minutes=settings.sign_in_lock_minutes),
    )
