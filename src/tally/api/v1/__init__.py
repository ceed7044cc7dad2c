"""The Data API, version 1 (read-only): `data`, its one route."""
