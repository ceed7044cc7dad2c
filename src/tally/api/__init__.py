"""The HTTP layer (FastAPI): routes, request models, error rendering. Calls services."""
