"""The HTTP layer (FastAPI): routes, request models, error rendering. Calls services.

- `app`: `create_app`; the OpenAPI document, with the bodies read by hand as
  components; Swagger UI from fastapi-offline's files; `asgi`: the app for a server
- `deps`: each service as a FastAPI dependency
- `errors`: error class to status and body per API version; handlers; OpenAPI responses
- `compression` (gzip with zlib-ng), `cors`, `health`
- `queries/`: where Data API reads run; `v1/`: the Data API; `v2/`: the ingestion API
"""
