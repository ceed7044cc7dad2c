"""A Data API page's body: its rows' JSON text inside the spec's envelope, stitched
rather than parsed and re-serialised, whether the page was read whole or in parts by
several query processes (api/queries/page_parts.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PagePart:
    """Some rows of a page, and what its envelope needs; parts read by different query
    processes are stitched together only when they read the same data version."""

    rows: bytes  # JSON objects, comma-separated
    returned: int
    total: int
    page: int
    page_size: int
    data_version: int
    cache_key: tuple[Any, ...]  # the whole page's response-cache key


@dataclass(frozen=True)
class StitchedPage:
    """How a page's parts make its body: `start`, the rows of the parts at `filled`
    (in order, a comma between two), then `end`. The rows may travel compressed."""

    start: bytes
    end: bytes
    filled: tuple[int, ...]

    def body(self, rows: Sequence[bytes]) -> bytes:
        return self.start + b",".join(rows[i] for i in self.filled) + self.end


def stitch_parts(parts: Sequence[PagePart]) -> StitchedPage | None:
    """The page's envelope around its parts; None when the parts disagree (a delivery
    landed between their reads), so the page must be read again whole."""
    first = parts[0]
    if any(p.data_version != first.data_version or p.total != first.total for p in parts):
        return None
    start, end = envelope_ends(
        sum(p.returned for p in parts), first.total, first.page, first.page_size
    )
    return StitchedPage(start, end, tuple(i for i, p in enumerate(parts) if p.returned))


def envelope(rows: bytes, returned: int, total: int, page: int, page_size: int) -> bytes:
    """The rows arrive as JSON text from the database; the envelope is stitched around
    them rather than parsing and re-serialising a million values."""
    start, end = envelope_ends(returned, total, page, page_size)
    return b"".join((start, rows, end))


def envelope_ends(returned: int, total: int, page: int, page_size: int) -> tuple[bytes, bytes]:
    meta = {
        "page": page,
        "page_size": page_size,
        "returned_count": returned,
        "total_count": total,
        "total_pages": math.ceil(total / page_size),
    }
    return b'{"data":[', b'],"meta":' + _meta_json(meta) + b"}"


def _meta_json(meta: dict[str, int]) -> bytes:
    # The stdlib encoder: `page` may be any integer (orjson stops at 64 bits, a 500).
    return json.dumps(meta, separators=(",", ":")).encode()
