"""Reading a value out of a JSON document by a path: `a.b.c`, `items[0].url`, `[2]`.

The webhook's file_mapping names where the file URL and name sit in a notification.
"""

from __future__ import annotations

import re
from typing import Any

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


class PathSyntaxError(ValueError):
    pass


def parse_path(path: str) -> list[str | int]:
    """'items[0].url' -> ['items', 0, 'url']; raises PathSyntaxError when malformed."""
    if not path or path.strip() != path:
        raise PathSyntaxError(f"invalid path {path!r}")
    parts: list[str | int] = []
    position = 0
    while position < len(path):
        if path[position] == "." and parts and position + 1 < len(path):
            position += 1
        match = _SEGMENT.match(path, position)
        if match is None:
            raise PathSyntaxError(f"invalid path {path!r} at character {position + 1}")
        key, index = match.groups()
        parts.append(int(index) if index is not None else key)
        position = match.end()
    return parts


def lookup(document: Any, path: str) -> Any:
    """The value at `path`, or None when any step is missing."""
    current = document
    for part in parse_path(path):
        if isinstance(part, int):
            if not isinstance(current, list) or part >= len(current):
                return None
            current = current[part]
        else:
            if not isinstance(current, dict) or part not in current:
                return None
            current = current[part]
    return current
