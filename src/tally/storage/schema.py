"""The control plane's tables: one MetaData, the source of truth alembic is checked against.

Rows of resources live in tables of their own (see resource_tables/); this schema
holds who owns what, and each resource's columns and data version.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from tally.core.encodings import DEFAULT_ENCODING
from tally.core.names import FILENAME_MAX_CHARS

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# Every id is a 32-bit integer (`Integer`): a larger number names nothing, and must not
# reach the driver (SQLite and psycopg refuse it with errors of their own).
MAX_ID = 2**31 - 1


def is_storable_id(value: int) -> bool:
    return 0 < value <= MAX_ID


accounts = Table(
    "accounts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("allowed_origins", JSON, nullable=False, default=list),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

workspaces = Table(
    "workspaces",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("account_id", ForeignKey("accounts.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("ingestion_enabled", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

folders = Table(
    "folders",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

resources = Table(
    "resources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("folder_id", ForeignKey("folders.id"), nullable=True),
    Column("name", String(200), nullable=False),
    Column("kind", String(20), nullable=False),
    # [{"name", "physical", "type", "scale"?, "timezone"?}, ...] in display order
    Column("columns", JSON, nullable=False),
    # Placeholder sources take their columns from their first file.
    Column("is_placeholder", Boolean, nullable=False, default=False),
    Column("data_version", BigInteger, nullable=False, default=0),
    Column("row_count", BigInteger, nullable=False, default=0),
    Column("indexed_version", BigInteger, nullable=False, default=0),
    # The data version whose rows all had their JSON text stored (decision 0011).
    Column("rendered_version", BigInteger, nullable=False, default=0, server_default="0"),
    # The encoding of a source's files, as core.encodings names it (decision 0015).
    Column("encoding", String(50), nullable=False, server_default=DEFAULT_ENCODING),
    # Leading and trailing lines its files skip, its columns' declared formats
    # (core.formats.FileLayout as JSON); NULL: none (issue 32).
    Column("file_layout", JSON, nullable=True),
    # A source's files: `append` their rows, or `replace` all its rows (snapshots).
    Column("mode", String(10), nullable=False, default="append", server_default="append"),
    # The data version at which rows were last removed (a snapshot replaced, a file
    # taken back); 0: never. Until then a resource's rows only grew.
    Column("removed_version", BigInteger, nullable=False, default=0, server_default="0"),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("workspace_id", "name"),
    CheckConstraint("kind IN ('source', 'reconciliation', 'transformation')", name="kind"),
)

# --- ingestion (API v2) --------------------------------------------------------------

webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("resource_id", ForeignKey("resources.id"), nullable=False, index=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False),
    # The webhook id is a credential: only its SHA-256 is kept.
    Column("webhook_id_hash", String(64), nullable=False, unique=True),
    Column("url_field", String(500), nullable=False),
    Column("filename_field", String(500), nullable=False),
    # Download credentials, Fernet-encrypted JSON; NULL for public or pre-signed URLs.
    Column("credentials_encrypted", Text, nullable=True),
    Column("response_status", Integer, nullable=False),
    Column("response_content_type", String(200), nullable=False),
    Column("response_body", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

notification_endpoints = Table(
    "notification_endpoints",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("resource_id", ForeignKey("resources.id"), nullable=False, index=True),
    Column("url", Text, nullable=False),
    Column("secret_encrypted", Text, nullable=True),
    Column("events", JSON, nullable=True),  # NULL: every event
    # Set when the endpoint answered 410 Gone: nothing more is sent to it.
    Column("disabled_at", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

files = Table(
    "files",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("resource_id", ForeignKey("resources.id"), nullable=False),
    Column("webhook_id", ForeignKey("webhooks.id"), nullable=True),
    Column("origin", String(20), nullable=False),  # webhook | upload
    # The URL may carry a pre-signed secret: kept encrypted, shown redacted.
    Column("url_encrypted", Text, nullable=True),
    Column("url_redacted", Text, nullable=True),
    Column("filename", String(FILENAME_MAX_CHARS), nullable=True),
    Column("idempotency_key", String(200), nullable=True),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("error", Text, nullable=True),
    Column("rows", BigInteger, nullable=True),
    Column("bytes", BigInteger, nullable=True),
    Column("sha256", String(64), nullable=True),
    Column("blob_path", Text, nullable=True),
    # The encoding of the bytes when it is not the source's: UTF-8 for CSV tally made
    # from JSON rows (decision 0015); NULL: the source's.
    Column("encoding", String(50), nullable=True),
    # What the load noticed without failing the file (a column of dates kept as text),
    # a JSON list of messages; NULL: nothing.
    Column("warnings", JSON, nullable=True),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("give_up_at", DateTime(timezone=True), nullable=False),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    # A delivered file taken back: when, and by whom (`api key sha256:...`, `tally admin`).
    Column("retracted_at", DateTime(timezone=True), nullable=True),
    Column("retracted_by", String(200), nullable=True),
    # Who sent an upload: a console user's name, or `api key sha256:...`; NULL for a
    # webhook's file and for uploads before revision 0016.
    Column("uploaded_by", String(200), nullable=True),
    UniqueConstraint("resource_id", "idempotency_key"),
    CheckConstraint(
        "status IN ('queued', 'downloading', 'loading', 'delivered', 'duplicate', 'failed', "
        "'retracted')",
        name="status",
    ),
)
Index("ix_files_claimable", files.c.status, files.c.next_attempt_at)
Index("ix_files_resource_id", files.c.resource_id, files.c.id)
Index("ix_files_resource_sha256", files.c.resource_id, files.c.sha256)

# A file's attempts that did not deliver it: the error of each, and when the next was due
# (NULL: the file failed for good). The attempt that ends a file well is the file itself.
file_attempts = Table(
    "file_attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("file_id", ForeignKey("files.id"), nullable=False, index=True),
    Column("attempt_number", Integer, nullable=False),
    Column("error", Text, nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=False),
    Column("next_attempt_at", DateTime(timezone=True), nullable=True),
)

# Facts for other parts of tally, written in the transaction of the change they record
# (`input_changed` queues the derived runs reading the resource; status callbacks fan
# out from here).
outbox_events = Table(
    "outbox_events",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("topic", String(50), nullable=False),  # input_changed | status_callback
    Column("type", String(50), nullable=False),
    Column("resource_id", ForeignKey("resources.id"), nullable=False),
    Column("file_id", ForeignKey("files.id"), nullable=True),
    Column("payload", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("processed_at", DateTime(timezone=True), nullable=True),
)
Index("ix_outbox_events_pending", outbox_events.c.topic, outbox_events.c.processed_at)
# A source's events newest first (its page's status notifications, a page at a time).
Index("ix_outbox_events_resource_id", outbox_events.c.resource_id, outbox_events.c.id)

# One row per (event, endpoint); retried on its own schedule (Svix's message attempt).
notification_deliveries = Table(
    "notification_deliveries",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", ForeignKey("outbox_events.id"), nullable=False),
    Column("endpoint_id", ForeignKey("notification_endpoints.id"), nullable=False),
    Column("message_id", String(64), nullable=False, unique=True),  # webhook-id, stable
    Column("status", String(20), nullable=False),  # pending | delivered | failed
    Column("attempts", Integer, nullable=False, default=0),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
)
Index("ix_notification_deliveries_event_id", notification_deliveries.c.event_id)
Index(
    "ix_notification_deliveries_due",
    notification_deliveries.c.status,
    notification_deliveries.c.next_attempt_at,
)

notification_attempts = Table(
    "notification_attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("delivery_id", ForeignKey("notification_deliveries.id"), nullable=False, index=True),
    Column("attempt_number", Integer, nullable=False),
    Column("url", Text, nullable=False),
    Column("status_code", Integer, nullable=True),
    Column("response_excerpt", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("duration_ms", Integer, nullable=False),
    Column("attempted_at", DateTime(timezone=True), nullable=False),
    Column("next_attempt_at", DateTime(timezone=True), nullable=True),
)

# --- derived resources (reconciliations, transformations) ------------------------------

# A resource computed from others: its definition, its inputs, and its run queue. The
# output is an ordinary row of `resources` (kind reconciliation | transformation) whose
# table a run replaces in one short transaction. A run is wanted while `run_due_at` is
# set; a worker claims it with a lease, as files are claimed (decision 0003).
derived_resources = Table(
    "derived_resources",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("resource_id", ForeignKey("resources.id"), nullable=False, unique=True),
    Column("kind", String(20), nullable=False),
    Column("name", String(200), nullable=False),
    Column("definition", JSON, nullable=False),
    Column("state", String(20), nullable=False),
    Column("error", Text, nullable=True),
    Column("run_due_at", DateTime(timezone=True), nullable=True),
    Column("attempts", Integer, nullable=False, default=0),  # failed runs in a row
    Column("lease_owner", String(100), nullable=True),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("last_run", JSON, nullable=True),
    # sha256 of the published output's content: a run that changes nothing keeps the
    # output's data version (the Data API's caches and pages stay valid).
    Column("output_digest", String(64), nullable=True),
    # what the last successful run read, for an incremental next run (decision 0016)
    Column("run_basis", JSON, nullable=True),
    # the run under way (null when none): when it was claimed, the phase it is in and
    # since when (services/derived/phases.py), written at each change of phase
    Column("run_started_at", DateTime(timezone=True), nullable=True),
    Column("run_phase", String(20), nullable=True),
    Column("run_phase_since", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("kind IN ('reconciliation', 'transformation')", name="kind"),
    CheckConstraint("state IN ('queued', 'running', 'idle', 'failed')", name="state"),
)
Index("ix_derived_resources_due", derived_resources.c.run_due_at)

# Each finished run of a derived resource, the last RUNS_KEPT of each (storage/derived/
# runs.py): written in the transaction that records the run's end, succeeded or failed.
derived_runs = Table(
    "derived_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("derived_id", ForeignKey("derived_resources.id"), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("rows", BigInteger, nullable=True),  # the output's, after a run that succeeded
    Column("error", Text, nullable=True),  # a failed run's, in full
    CheckConstraint("outcome IN ('succeeded', 'failed')", name="outcome"),
)
Index("ix_derived_runs_derived_id_id", derived_runs.c.derived_id, derived_runs.c.id)

# Which resources each derived resource reads: a change to one queues a run of each
# derived resource reading it.
derived_inputs = Table(
    "derived_inputs",
    metadata,
    Column("derived_id", ForeignKey("derived_resources.id"), primary_key=True),
    Column("resource_id", ForeignKey("resources.id"), primary_key=True, index=True),
)

# Every manual action on a reconciliation, kept: a manual match (`match`), a suggested
# match confirmed (`confirm`), an automatic or suggested match rejected (`reject`). A
# manual match undone keeps its row with `undone_at` set. Rows are 1-based positions
# in their input; `fingerprint` is the sha256 of their content when the action was taken.
reconciliation_actions = Table(
    "reconciliation_actions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("derived_id", ForeignKey("derived_resources.id"), nullable=False, index=True),
    Column("kind", String(20), nullable=False),
    # NULL for a resolution (rows of one side closed: no match)
    Column("match_id", Integer, nullable=True),
    Column("left_rows", JSON, nullable=False),
    Column("right_rows", JSON, nullable=False),
    Column("fingerprint", String(64), nullable=False),
    Column("note", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("undone_at", DateTime(timezone=True), nullable=True),
    Column("undo_note", Text, nullable=True),
    # Why the action stopped being in force without an analyst undoing it (its rows were
    # replaced or taken back, a side reads another resource); NULL otherwise.
    Column("retired_reason", Text, nullable=True),
    # The action this one continues: the same rows, found again at new positions.
    Column("carried_from", Integer, nullable=True),
    # Who took the action and who dissolved it: a console user's name, or
    # `api key sha256:<fingerprint>`; NULL for actions taken before this was kept.
    Column("actor", String(250), nullable=True),
    Column("undo_actor", String(250), nullable=True),
    # A resolution's reason code (one of its definition's `resolution_reasons`).
    Column("reason", String(40), nullable=True),
    # `define` and `run`: a definition replaced, a run asked for (history only, no rows)
    CheckConstraint(
        "kind IN ('match', 'confirm', 'reject', 'resolve', 'define', 'run')", name="kind"
    ),
)

# The console's people (issue #33). A user's name is unique across the installation
# (`name_key`, its case-folded form): the sign-in form asks for a username alone.
users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("workspace_id", ForeignKey("workspaces.id"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("name_key", String(200), nullable=False, unique=True),
    Column("role", String(16), nullable=False),
    Column("password_hash", String(200), nullable=True),  # argon2id; NULL until an invite
    Column("disabled", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("role IN ('viewer', 'analyst', 'admin')", name="role"),
)

# An invite: the sha256 of its token, never the token; `ended_at` once used or replaced.
user_invites = Table(
    "user_invites",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", ForeignKey("users.id"), nullable=False, index=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=True),
)

# A console session: the sha256 of its id (the cookie's value), never the id.
console_sessions = Table(
    "console_sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", ForeignKey("users.id"), nullable=False, index=True),
    Column("session_hash", String(64), nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("last_seen_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=True),
)

# Wrong passwords in a row per username, known or not (a lock that only known names
# could get would tell which names exist); the row goes at the next good sign-in.
sign_in_failures = Table(
    "sign_in_failures",
    metadata,
    Column("name_key", String(200), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("last_failed_at", DateTime(timezone=True), nullable=False),
    Column("locked_until", DateTime(timezone=True), nullable=True),
)
