"""A large page read in parts: one slice per query process, all at once, stitched
together if every part read the same data version (docs/decisions/0008).

Only a page of `SPLIT_MIN_ROWS` or more asked for while the pool is idle (an export
fetching pages one after another) is read so: a 10,000-row page on SQLite took 39 ms
whole, 23-25 ms in two parts; under load every process is busy anyway. Each part is a
complete request (authorised, counted, checkpointed and cached on its own). When the
client accepts gzip each part compresses its own rows and this process joins the
pieces into one gzip member (`compression.gzip_of_pieces`), compressing nothing again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools

from tally.api.compression import (
    BodyGzip,
    DeflatedPiece,
    EncodedBody,
    accepts_gzip,
    deflate_piece,
    encode_json_body,
    gzip_of_pieces,
    inflate_piece,
)
from tally.api.queries.pool import QueryProcessLostError, QueryProcessPool
from tally.api.queries.query_process import read_page_part, remember_page
from tally.core.filters import cap_page_size
from tally.services.data_query import CountHint, DataAnswer, DataRequest
from tally.services.page_bodies import PagePart, StitchedPage, stitch_parts

# Pages of fewer rows are read whole: a part costs ~0.7 ms of hand-over, and rendering
# 1,000 rows costs about 2 ms.
SPLIT_MIN_ROWS = 4000

PartAnswer = tuple[DataAnswer, DeflatedPiece | None]


class PagePartsReader:
    """Reads a page in one part per query process of `pool`, and stitches the parts."""

    def __init__(
        self, pool: QueryProcessPool, processes: int, gzip: BodyGzip, *, response_cache: bool
    ) -> None:
        self._pool = pool
        self._processes = processes
        self._gzip = gzip
        self._response_cache = response_cache

    def suits(self, request: DataRequest) -> bool:
        """Is the page large enough, and the pool more than one process?"""
        return self._processes > 1 and cap_page_size(request.page_size) >= SPLIT_MIN_ROWS

    async def read(
        self, request: DataRequest, accept_encoding: str | None
    ) -> tuple[EncodedBody | None, CountHint | None]:
        """The page, or None when it must be read whole after all (the parts saw
        different data versions, or a process was lost); and the count the parts paid."""
        # Each part compresses its own rows (gzip accepted): this process then only
        # joins them, and the parts hand over a sixth of the bytes. Their plain rows
        # come too only when the stitched page goes to the response cache.
        deflate = accepts_gzip(accept_encoding)
        keep_rows = self._response_cache or not deflate
        done = await self._read_parts(request, deflate, keep_rows)
        if done is None:
            return None, None
        answers = [answer for answer, _piece in done]
        count = answers[0].count
        cached = next((a.body for a in answers if a.part is None), None)
        if cached is not None:  # a part found the whole page in its response cache
            return encode_json_body(cached, accept_encoding=accept_encoding, gzip=self._gzip), count
        parts = [a.part for a in answers if a.part is not None]
        stitched = stitch_parts(parts)
        if stitched is None:
            return None, count
        pieces = [piece for _answer, piece in done if piece is not None]
        encoded = await self._encode(stitched, parts, pieces, accept_encoding, deflate, keep_rows)
        return encoded, count

    async def _read_parts(
        self, request: DataRequest, deflate: bool, keep_rows: bool
    ) -> list[PartAnswer] | None:
        """Every part's answer, in order; None when a query process was lost."""
        size = cap_page_size(request.page_size)
        bounds = [size * i // self._processes for i in range(self._processes + 1)]
        outcomes = await asyncio.gather(
            *(
                self._pool.call(
                    read_page_part, dataclasses.replace(request, rows=(start, stop)), deflate,
                    keep_rows,
                )
                for start, stop in itertools.pairwise(bounds)
            ),
            return_exceptions=True,
        )  # fmt: skip
        for outcome in outcomes:
            if isinstance(outcome, QueryProcessLostError):
                return None
            if isinstance(outcome, BaseException):
                raise outcome  # every part has the same request: the same error
        return [o for o in outcomes if not isinstance(o, BaseException)]

    async def _encode(
        self,
        stitched: StitchedPage,
        parts: list[PagePart],
        pieces: list[DeflatedPiece],
        accept_encoding: str | None,
        deflate: bool,
        keep_rows: bool,
    ) -> EncodedBody:
        if keep_rows:
            body = stitched.body([p.rows for p in parts])
            if self._response_cache:
                await self._remember(parts[0], body)
        else:
            body = b""
        if deflate and len(pieces) == len(parts):
            size = len(stitched.start) + len(stitched.end) + sum(p.size for p in pieces)
            if size > self._gzip.min_bytes:
                return EncodedBody(self._gzip_stitched(stitched, pieces), gzipped=True)
            body = body or stitched.body([inflate_piece(p) for p in pieces])
        return encode_json_body(body, accept_encoding=accept_encoding, gzip=self._gzip)

    async def _remember(self, part: PagePart, body: bytes) -> None:
        """Put the stitched page in a query process's response cache before answering,
        so the next identical request finds it (one of its parts runs there)."""
        with contextlib.suppress(QueryProcessLostError):  # then it is only read again
            await self._pool.call(remember_page, part.cache_key, body)

    def _gzip_stitched(self, stitched: StitchedPage, pieces: list[DeflatedPiece]) -> bytes:
        """The stitched page as one gzip member: the envelope's ends and the commas are
        compressed here (a few bytes), the parts' rows were compressed where they were
        read."""
        level = self._gzip.level
        comma = deflate_piece(b",", level)
        middle: list[DeflatedPiece] = []
        for n, index in enumerate(stitched.filled):
            middle += [comma, pieces[index]] if n else [pieces[index]]
        return gzip_of_pieces(
            [deflate_piece(stitched.start, level), *middle, deflate_piece(stitched.end, level)]
        )
