"""The ingestion API, version 2 (/api/v2).

- Routes: `webhooks` (and a source's webhook rotated), `sources`, `files`,
  `callback_deliveries` (a source's status callbacks; "Retry now"), `reconciliations`,
  `transformations`, `resources` (the workspace's resources, a page at a time);
  `derived_routes` (the five definition routes every derived kind shares, made once)
- Models, one home per feature, for what only the API reads or answers:
  `webhook_bodies`, `source_bodies`, `file_bodies`, `delivery_bodies`, `reconciliation_bodies`,
  `transformation_bodies`, `resource_bodies` (what the CLI reads too is below the API:
  core/source_bodies.py, services/<kind>/bodies.py); `bodies` reads a body within its
  size and checks it against its model
- Plumbing: `auth` (the three headers), `multipart` (uploads streamed within their
  limit)
"""
