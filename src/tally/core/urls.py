"""URLs as they may be shown or logged: without the query that pre-signed URLs carry."""

from __future__ import annotations

from urllib.parse import urlsplit


def redact_url(url: str) -> str:
    """Scheme, host and path only: pre-signed URLs carry secrets in the query. Only
    for URLs `core.names.http_url_problem` accepts (their port is a valid number)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
