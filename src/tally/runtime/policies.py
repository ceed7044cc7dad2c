"""Settings made into the values services take: limits, policies, the secret box.

Services never read `Settings` (import-linter's contract): each gets the few values it
needs as a frozen object built here, so a service's signature says what it depends on
and a test builds one without a settings object.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tally.core.limits import FileLimits
from tally.core.sealing import SecretBox
from tally.core.sql_limits import SqlLimits
from tally.core.users import SessionPolicy, SignInPolicy
from tally.settings import Settings
from tally.storage.home import open_private

if TYPE_CHECKING:
    from tally.net.fetch import AddressPolicy
    from tally.services.delivery import DeliveryPolicy
    from tally.services.derived.runs import RunPolicy
    from tally.services.transformations.runs import RunLimits


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
    from tally.net.fetch import AddressPolicy

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
    from tally.net.fetch import FetchLimits
    from tally.services.delivery import DeliveryPolicy

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


def run_limits(settings: Settings) -> RunLimits:
    from tally.services.transformations.runs import RunLimits

    return RunLimits(
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


def run_policy(settings: Settings) -> RunPolicy:
    from tally.services.derived.runs import RunPolicy

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
