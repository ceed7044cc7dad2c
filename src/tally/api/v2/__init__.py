"""The ingestion API, version 2."""
