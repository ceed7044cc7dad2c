"""The ingestion API, version 2 (/api/v2).

- Routes: `webhooks`, `sources`, `files`, `reconciliations`, `transformations`;
  `derived_routes` (the five definition routes every derived kind shares, made once)
- Models, one home per feature: `bodies` (webhooks and sources, and the body-reading
  helpers), `reconciliation_bodies`, `transformation_bodies`
- Plumbing: `auth` (the three headers), `multipart` (uploads streamed within their
  limit)
"""
