"""The composition root: builds the engine and every service from Settings, once per
process (procrastinate's `App(connector=...)`).

Entry points (api, cli, worker) get their services here; they never import storage, net
or sqlalchemy (import-linter's contract in pyproject.toml). `engine` stays visible for
the query processes' wiring and for tests that look at stored rows.

Each service is built when it is first asked for, and its module imported then: a
command of `tally admin` uses one or two of them, and importing them all (sqlglot,
numpy, httpx, argon2, standardwebhooks...) was most of its start-up (issue #36).

Modules:
- `policies`: settings made into the limits and policies services take.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from tally.core.limits import MIB
from tally.core.log_lines import ContextFormatter
from tally.core.redaction import SecretRedactor
from tally.core.sealing import SecretBox
from tally.runtime.policies import (
    address_policy,
    delivery_policy,
    file_limits,
    run_limits,
    run_policy,
    secret_box,
    session_policy,
    sign_in_policy,
)
from tally.settings import Settings
from tally.storage.blobs import BlobStore
from tally.storage.engine import backend_of, create_database_engine
from tally.storage.home import prepare_home, write_private
from tally.storage.migrate import upgrade_database

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from tally.services.admin import AdminService
    from tally.services.authentication import AuthenticationService
    from tally.services.callback_deliveries import CallbackDeliveries
    from tally.services.catalogue import SourceCatalogue
    from tally.services.data_query import DataQueryService
    from tally.services.delivery import DeliveryService
    from tally.services.derived.runs import DerivedRuns
    from tally.services.files import FileService
    from tally.services.notification_intake import NotificationIntake
    from tally.services.reconciliation.service import ReconciliationService
    from tally.services.reconciliation_summary import ReconciliationSummaries
    from tally.services.resource_listing import ResourceListing
    from tally.services.row_export import RowExport
    from tally.services.sources import SourceService
    from tally.services.status_callbacks import CallbackSender
    from tally.services.transformations.previews import Previews
    from tally.services.transformations.service import TransformationService
    from tally.services.uploads import UploadService
    from tally.services.users import SessionService, UserService
    from tally.services.webhooks import WebhookService

UVICORN_LOGGERS = ("uvicorn.access", "uvicorn.error")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

T = TypeVar("T")


class _BuiltOnce(Generic[T]):
    """A part of the runtime built on first use, once, under the runtime's lock (two
    threads of `tally serve` may ask at once; functools.cached_property has no lock
    since Python 3.12). Built, it is an attribute of the runtime, read without a call."""

    def __init__(self, build: Callable[[Runtime], T]) -> None:
        self._build = build
        self._name = build.__name__

    @overload
    def __get__(self, runtime: None, owner: type[Runtime]) -> _BuiltOnce[T]: ...

    @overload
    def __get__(self, runtime: Runtime, owner: type[Runtime]) -> T: ...

    def __get__(self, runtime: Runtime | None, owner: type[Runtime]) -> T | _BuiltOnce[T]:
        if runtime is None:
            return self
        built: dict[str, Any] = vars(runtime)
        with runtime._lock:
            if self._name not in built:
                built[self._name] = self._build(runtime)
            value: T = built[self._name]
        return value


class Runtime:
    """The settings, the database (migrated), the secret box and the blob store, built
    at once; the services and their own engines, each built on first use."""

    def __init__(self, settings: Settings, engine: Engine, box: SecretBox) -> None:
        self.settings = settings
        self.engine = engine
        self.box = box
        self.blobs = BlobStore(settings.blob_dir)
        self._lock = threading.RLock()  # re-entered: a service builds those it uses
        self._engines = [engine]
        self._closing: list[Callable[[], None]] = []  # what a built service must stop

    @property
    def backend_name(self) -> str:
        return backend_of(self.engine).name

    def write_home_file(self, name: str, text: str) -> Path:
        """A file in TALLY_HOME only its owner may read (demo.env holds an API key)."""
        path = self.settings.home / name
        write_private(path, text.encode())
        return path

    def close(self) -> None:
        for stop in reversed(self._closing):
            stop()
        for engine in self._engines:
            engine.dispose()

    def build_every_service(self) -> None:
        """Builds what is not built yet. A server's process does so at its start: its
        requests then pay no import, and what they use is among the start-up objects
        frozen out of the collector (decision 0007); a command builds only its own."""
        for name, part in vars(type(self)).items():
            if isinstance(part, _BuiltOnce):
                getattr(self, name)

    def _own_engine(self, pool_size: int) -> Engine:
        """A pool of its own, so that its user waits for no one else's connections."""
        engine = create_database_engine(
            self.settings.effective_database_url(),
            pool_size=pool_size,
            overflow=False,
            pool_timeout=self.settings.database_pool_timeout_seconds,
        )
        self._engines.append(engine)
        return engine

    # The notification intake's one thread, one connection at a time (issue #30).
    @_BuiltOnce
    def intake_engine(self) -> Engine:
        return self._own_engine(1)

    # The previews hold one each, at most TALLY_PREVIEW_CONCURRENCY at once (Previews
    # refuses more before asking).
    @_BuiltOnce
    def preview_engine(self) -> Engine:
        return self._own_engine(self.settings.preview_concurrency)

    @_BuiltOnce
    def admin(self) -> AdminService:
        from tally.services.admin import AdminService

        return AdminService(self.engine)

    @_BuiltOnce
    def authentication(self) -> AuthenticationService:
        from tally.services.authentication import AuthenticationService

        return AuthenticationService(self.engine)

    @_BuiltOnce
    def catalogue(self) -> SourceCatalogue:
        from tally.services.catalogue import SourceCatalogue

        return SourceCatalogue(
            self.engine, limits=file_limits(self.settings), staging_dir=self.blobs.staging_dir
        )

    @_BuiltOnce
    def data_query(self) -> DataQueryService:
        service = _data_query_service(self.settings, self.engine)
        if service.snapshots is not None:
            # A column snapshot still being built holds a connection of this engine.
            self._closing.append(service.snapshots.wait)
        return service

    @_BuiltOnce
    def delivery(self) -> DeliveryService:
        from tally.services.delivery import DeliveryService
        from tally.services.file_loading import FileLoading
        from tally.services.loader.pace import LoadPace

        limits, staging_dir = file_limits(self.settings), self.blobs.staging_dir
        pace = LoadPace(self.settings.load_rate_while_accepting * MIB)
        loading = FileLoading(self.engine, limits=limits, staging_dir=staging_dir, pace=pace)
        return DeliveryService(
            self.engine,
            self.box,
            self.blobs,
            delivery_policy(self.settings),
            self.catalogue,
            loading,
        )

    @_BuiltOnce
    def derived(self) -> DerivedRuns:
        from tally.services.derived.runs import DerivedRuns
        from tally.services.reconciliation.runs import ReconciliationBuilder
        from tally.services.transformations.runs import TransformationBuilder

        staging_dir = self.blobs.staging_dir
        return DerivedRuns(
            self.engine,
            run_policy(self.settings),
            {
                "reconciliation": ReconciliationBuilder(self.engine),
                "transformation": TransformationBuilder(
                    self.engine, run_limits(self.settings), staging_dir
                ),
            },
            staging_dir,
        )

    @_BuiltOnce
    def files(self) -> FileService:
        from tally.services.files import FileService

        return FileService(self.engine)

    @_BuiltOnce
    def intake(self) -> NotificationIntake:
        from tally.services.notification_intake import NotificationIntake

        intake = NotificationIntake(
            self.intake_engine, self.box, deadline_seconds=self.settings.delivery_deadline_seconds
        )
        self._closing.append(intake.close)
        return intake

    @_BuiltOnce
    def callbacks(self) -> CallbackSender:
        from tally.services.status_callbacks import CallbackSender

        settings = self.settings
        return CallbackSender(
            engine=self.engine,
            box=self.box,
            addresses=address_policy(settings),
            retry_schedule_seconds=settings.retry_schedule(),
            timeout_seconds=settings.callback_timeout_seconds,
            lease_seconds=settings.lease_seconds,
        )

    @_BuiltOnce
    def callback_deliveries(self) -> CallbackDeliveries:
        from tally.services.callback_deliveries import CallbackDeliveries

        return CallbackDeliveries(self.engine)

    @_BuiltOnce
    def previews(self) -> Previews:
        from tally.services.transformations.previews import Previews

        previews = Previews(
            self.preview_engine,
            run_limits(self.settings),
            total=self.settings.preview_concurrency,
            per_workspace=self.settings.preview_workspace_concurrency,
        )
        self._closing.append(previews.close)
        return previews

    @_BuiltOnce
    def reconciliations(self) -> ReconciliationService:
        from tally.services.reconciliation.service import ReconciliationService

        return ReconciliationService(self.engine)

    @_BuiltOnce
    def listing(self) -> ResourceListing:
        from tally.services.resource_listing import ResourceListing

        return ResourceListing(self.engine)

    @_BuiltOnce
    def reconciliation_summaries(self) -> ReconciliationSummaries:
        from tally.services.reconciliation_summary import ReconciliationSummaries

        return ReconciliationSummaries(self.reconciliations, self.listing)

    @_BuiltOnce
    def exports(self) -> RowExport:
        from tally.services.row_export import RowExport

        return RowExport(self.engine)

    @_BuiltOnce
    def sources(self) -> SourceService:
        from tally.services.sources import SourceService

        return SourceService(self.engine, self.box)

    @_BuiltOnce
    def transformations(self) -> TransformationService:
        from tally.services.transformations.service import TransformationService

        return TransformationService(self.engine, run_limits(self.settings))

    @_BuiltOnce
    def uploads(self) -> UploadService:
        from tally.services.uploads import UploadService

        return UploadService(
            self.engine,
            self.blobs,
            max_file_bytes=self.settings.max_file_bytes,
            deadline_seconds=self.settings.delivery_deadline_seconds,
        )

    @_BuiltOnce
    def users(self) -> UserService:
        from tally.services.users import UserService

        return UserService(self.engine, public_url=self.settings.public_url)

    @_BuiltOnce
    def sessions(self) -> SessionService:
        from tally.services.users import SessionService

        return SessionService(
            self.engine,
            sessions=session_policy(self.settings),
            sign_in=sign_in_policy(self.settings),
        )

    @_BuiltOnce
    def webhooks(self) -> WebhookService:
        from tally.services.webhooks import WebhookService

        return WebhookService(self.engine, self.box)


def build_runtime(settings: Settings, *, migrate: bool = True) -> Runtime:
    _configure_logging(settings)
    prepare_home(settings.home)
    engine = create_database_engine(
        settings.effective_database_url(),
        pool_size=settings.database_pool_size,
        pool_timeout=settings.database_pool_timeout_seconds,
    )
    if migrate:
        upgrade_database(engine)
    return Runtime(settings, engine, secret_box(settings))


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
    from tally.services.column_snapshots import ColumnSnapshots
    from tally.services.data_query import DataQueryService

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
