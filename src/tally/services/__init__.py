"""Domain services: the use cases, as objects built once per process (tally.runtime). They
call storage, net and processes; never FastAPI, typer or the settings.

- The Data API: `data_query` (`DataQueryService`: authorise, plan, count, page, caches),
  `page_bodies` (a page's rows inside the spec's envelope, whole or stitched from
  parts), `column_snapshots` (a large resource's columns in memory per data version:
  any filter set's count and page rows, decision 0014), `workspace_rows` (the same
  reads for a signed-in member of the workspace: the console), `row_export`
  (`RowExport`: a whole filtered, sorted view as CSV, streamed in one snapshot)
- Accounts: `admin` (`AdminService`: accounts, workspaces, keys), `authentication` (the
  three-header check), `users` (the console's users and invites, `UserService`; sign-in
  and sessions, `SessionService`)
- Ingestion, one noun each: `webhooks` (registration), `sources` (POST /api/v2/sources),
  `callback_endpoints` (a webhook's or source's status-callback endpoints),
  `notification_intake` (notifications committed in groups, decision 0005) over
  `notified_files` (what one notification queues), `uploads` (files fed by upload) +
  `json_rows` (JSON rows as CSV), `files` (a source's files), `file_events` (their
  outbox events), `delivery` (`DeliveryService`: a file from claim to final state),
  `heartbeat` (a lease renewed while its job works), `file_loading` (a file's one
  delivery transaction), `status_callbacks` (`CallbackSender`: outbox, deliveries,
  signed attempts), `callback_deliveries` (a source's deliveries listed, "Retry now")
- Sources: `catalogue` (`SourceCatalogue`: sources, loads, what a load leaves to the
  workers), `loader/` (reading, inferring and loading a file), `row_removal` (a
  snapshot's rows replaced, a file's rows taken back, the manual work found again)
- `resource_listing` (`ResourceListing`: a workspace's resources a page at a time, each
  source's last file and recent failures: the console's overview, GET /api/v2/resources)
- `reconciliation_figures` (a reconciliation's shares reconciled, unmatched amounts and
  oldest unmatched item, from its last run), `reconciliation_summary`
  (`ReconciliationSummaries`: one reconciliation as its console page shows it)
- Derived resources: `derived/` (what every kind shares), `reconciliation/`,
  `transformations/`
"""
