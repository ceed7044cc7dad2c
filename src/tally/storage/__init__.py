"""Storage: the SQL database (SQLAlchemy Core) and the file store. Imports only
tally.core; no service ever sees a driver's exception (`db_errors`).

- The database: `engine` (SQLite WAL or PostgreSQL, `Backend` capability flags,
  `write_connection`, `snapshot_connection`, `job_step`: decision 0017),
  `wal_checkpoints` (SQLite's log checkpointed by a thread of its own, decision 0019),
  `schema` + `migrations/` + `migrate`, `db_errors` (driver errors as tally's;
  `BusyQueuePool`: 503 past the pool's wait), `home` (TALLY_HOME 0700, files 0600,
  decision 0023)
- Accounts and ingestion: `accounts`, `users` (the console's users, invites, sessions
  and sign-in failures), `webhooks`, `files` (the file queue; LISTEN/NOTIFY
  on PostgreSQL), `file_attempts` (a file's attempts that did not deliver it),
  `notified_groups` (PostgreSQL: a group of notifications in two statements, decision
  0021), `outbox`, `status_callbacks` (callback deliveries and attempts),
  `callback_deliveries` (a source's deliveries as people see them; "Retry now"),
  `leases` (`Leases`: one claim, extend and hold for every job row)
- Resources: `resources` (the catalogue; a resource created with its table),
  `resource_listing` (a workspace's resources a page at a time, sources' last files and
  failures), `access`
  (the Data API's one authorisation query), `resource_tables/` (the row tables),
  `bulk_load/` (a file's rows appended, converted by the database), `staging` (SQLite
  loads staged in a file of their own, decision 0013), `blobs` (the one writer of
  downloaded files: temp file, sha256, fsync, rename)
- Derived resources: `derived/` (records, plans, outputs), `reconciliation_inputs` (both
  sides read in one snapshot as columns), `reconciliation_actions` (manual work),
  `reconciliation_matches` (a page of an output's match ids and their count),
  `reconciliation_history` (its actions and undos as entries, newest first),
  `reconciliation_candidates` (the index reads that find a row's candidates),
  `reconciliation_keys` (each input row's normalised keys, `r_{id}_keys`),
  `reconciliation_patch` (the rows an incremental run replaces), `transformation_sql` (a
  transformation's SELECT run within its limits, in `sql_forms/` of the connection's
  backend), `sql_conversions` (text read as a number or a date: one grammar for Python
  and PostgreSQL, and the words of a failure), `sql_functions` (regular expressions on
  RE2 within a budget, conversions and an overflow check, registered on SQLite
  connections)
"""
