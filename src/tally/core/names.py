"""What people may call things in tally (accounts, workspaces, sources), and the form of
a browser origin an account allows. One rule for every edge: the CLI and the HTTP API
refuse the same names with the same words."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

NAME_MAX_CHARS = 200
FILENAME_MAX_CHARS = 1000
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Regular expressions, not a loop over the characters: every notification's URL and file
# name is checked on the intake's one thread, and a loop cost it about 10 µs of each.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x1f\x7f\s]")  # \s: what str.isspace() is true of


def name_problem(value: str) -> str | None:
    """Why `value` cannot be a name, or None when it can. Control characters are
    refused: they are invisible in listings, and PostgreSQL text cannot hold NUL."""
    if not value.strip():
        return "must not be blank"
    if len(value) > NAME_MAX_CHARS:
        return f"must be at most {NAME_MAX_CHARS} characters"
    if has_control_characters(value):
        return "must not contain control characters"
    return None


def has_control_characters(value: str) -> bool:
    return _CONTROL.search(value) is not None


def filename_problem(value: str) -> str | None:
    """Why a file name (from a notification or an upload) cannot be kept, or None."""
    if len(value) > FILENAME_MAX_CHARS:
        return f"must be at most {FILENAME_MAX_CHARS} characters"
    if has_control_characters(value):
        return "must not contain control characters"
    return None


def http_url_problem(value: str) -> str | None:
    """Why a download or callback could not start from `value`, or None: http(s), a
    host, a valid port, no whitespace or control characters (which `urlsplit` would
    quietly strip), and no user:password (credentials belong in configuration, kept
    encrypted, not in URLs that get shown and logged)."""
    if _CONTROL_OR_SPACE.search(value) is not None:
        return "is not an http(s) URL"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return "is not an http(s) URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user or password"
    return None


def canonical_origin(value: str) -> str:
    """The origin as a browser sends it in its Origin header (`scheme://host[:port]`,
    lower case, no default port), so that a stored origin compares equal to the header.
    Raises ValueError saying what is wrong."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError as error:
        raise ValueError(f"{value!r} is not an origin ({error})") from None
    host_name = parts.hostname or ""
    if parts.scheme.lower() not in _DEFAULT_PORTS or not host_name or " " in host_name:
        raise ValueError(f"{value!r} is not an origin: expected http(s)://host[:port]")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{value!r} is not an origin: it must not carry credentials")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"{value!r} is not an origin: no path, query or fragment")
    scheme = parts.scheme.lower()
    try:
        host = host_name.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"{value!r} is not an origin: the host name is not valid") from None
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"
