"""gzip for the Data API's bodies, with zlib-ng (python-zlib-ng) instead of zlib.

A Data API body is compressed in the query process that rendered it, so the compressor
shares the process with SQLite. Measured on Q5's 171 KB body and a 2.1 MB export page:
zlib's fastest level 0.69 / 8.9 ms, zlib-ng's 0.33 / 4.4 ms (a fifth larger output).
ISA-L (python-isal) takes 0.16 / 2.3 ms, but its AVX-512 code returns without
`vzeroupper` (intel/isa-l#24): after its first call every SSE instruction of the
process pays a transition penalty, and SQLite then rendered the same Q5 page in 2.4 ms
instead of 1.8 ms, far more than ISA-L saves. The level is TALLY_GZIP_LEVEL, whose
default 1 is zlib-ng's quickest (Q5 38 KB in 0.33 ms; level 2 28 KB in 0.53 ms).
Starlette's gzip responder still compresses the other responses (behind
`NegotiatedGZipMiddleware`), with zlib-ng's compressor too (`ZlibNgGZipResponder`); it
leaves a body that already has a Content-Encoding alone.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from starlette.datastructures import Headers
from starlette.middleware.gzip import GZipResponder
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from zlib_ng import zlib_ng

if TYPE_CHECKING:
    import zlib

    from tally.settings import Settings

GZIP_WBITS = 16 + zlib_ng.MAX_WBITS  # a gzip member (header and trailer), not a zlib stream
GZIP_ALIASES = {"x-gzip": "gzip"}  # RFC 9110: x-gzip is gzip


def accepts_gzip(accept_encoding: str | None) -> bool:
    """May the answer be gzipped (RFC 9110, 12.5.3)? gzip's own entry decides when the
    header lists it (`q=0` refuses it), else a `*` entry does; no entry, no gzip."""
    qualities: dict[str, float] = {}
    for part in (accept_encoding or "").split(","):
        coding, *params = part.split(";")
        name = GZIP_ALIASES.get(coding.strip().lower(), coding.strip().lower())
        if name in ("gzip", "*") and name not in qualities:
            qualities[name] = _quality(params)
    return qualities.get("gzip", qualities.get("*", 0.0)) > 0


def _quality(params: list[str]) -> float:
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0  # a weight that cannot be read does not accept
    return 1.0


class NegotiatedGZipMiddleware:
    """Starlette's gzip responder for every answer not compressed already, used only
    when the client accepts gzip. Starlette's GZipMiddleware gzips whenever "gzip"
    appears anywhere in Accept-Encoding (`gzip;q=0`, a refusal, included) and not for
    `*`; and when it does not compress it repeats the Vary the Data API's bodies carry."""

    def __init__(self, app: ASGIApp, *, minimum_size: int, compresslevel: int) -> None:
        self.app = app
        self.minimum_size = minimum_size
        self.compresslevel = compresslevel

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and accepts_gzip(Headers(scope=scope).get("accept-encoding")):
            responder = ZlibNgGZipResponder(self.app, self.minimum_size, self.compresslevel)
            await responder(scope, receive, send)
        else:
            await self.app(scope, receive, send)


class ZlibNgGZipResponder(GZipResponder):
    """Starlette's gzip responder compressing with zlib-ng: a streamed body such as the
    console's CSV export is compressed as it goes, and zlib's level 1 cost it 0.82 µs a
    row (1M rows), zlib-ng's 0.31 (docs/benchmarks.md, "The console")."""

    @property
    def compressor(self) -> zlib._Compress:
        if self._compressor is None:
            made = zlib_ng.compressobj(self.compresslevel, zlib_ng.DEFLATED, GZIP_WBITS)
            self._compressor = cast("zlib._Compress", made)  # the same methods as zlib's
        return self._compressor


@dataclass(frozen=True)
class EncodedBody:
    """A JSON body as it goes on the wire; built where the query ran (it may be another
    process), so the compression is spent there too."""

    content: bytes
    gzipped: bool


@dataclass(frozen=True)
class BodyGzip:
    """Which Data API bodies are gzipped (`min_bytes` or more) and how hard (`level`):
    TALLY_GZIP_MIN_BYTES and TALLY_GZIP_LEVEL, held by every process that compresses one."""

    min_bytes: int
    level: int

    @classmethod
    def from_settings(cls, settings: Settings) -> BodyGzip:
        return cls(min_bytes=settings.gzip_min_bytes, level=settings.gzip_level)


def encode_json_body(body: bytes, *, accept_encoding: str | None, gzip: BodyGzip) -> EncodedBody:
    if len(body) >= gzip.min_bytes and accepts_gzip(accept_encoding):
        return EncodedBody(zlib_ng.compress(body, gzip.level, wbits=GZIP_WBITS), gzipped=True)
    return EncodedBody(body, gzipped=False)


@dataclass(frozen=True)
class DeflatedPiece:
    """Some bytes of a body compressed on their own: raw deflate ended by a sync flush,
    so pieces compressed in different processes can follow one another in one stream."""

    data: bytes
    crc: int  # CRC-32 of the uncompressed bytes
    size: int  # their length


def deflate_piece(data: bytes, level: int) -> DeflatedPiece:
    compressor = zlib_ng.compressobj(level, zlib_ng.DEFLATED, -zlib_ng.MAX_WBITS)
    compressed = compressor.compress(data) + compressor.flush(zlib_ng.Z_SYNC_FLUSH)
    return DeflatedPiece(compressed, zlib_ng.crc32(data), len(data))


def inflate_piece(piece: DeflatedPiece) -> bytes:
    return zlib_ng.decompressobj(-zlib_ng.MAX_WBITS).decompress(piece.data)


# RFC 1952: magic, deflate, no flags, no time, no extra flags, unknown OS.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# The same two bytes at every level from 1 to 9.
_FINAL_EMPTY_BLOCK = zlib_ng.compressobj(wbits=-zlib_ng.MAX_WBITS).flush(zlib_ng.Z_FINISH)


def gzip_of_pieces(pieces: Sequence[DeflatedPiece]) -> bytes:
    """One gzip member holding the pieces in order, without compressing anything again.
    Written here because no library joins deflate streams compressed apart: the pieces'
    blocks follow one another, an empty final block closes the stream, and the
    trailer's CRC-32 is combined from the pieces' own (RFC 1952)."""
    crc, size = 0, 0
    for piece in pieces:
        crc = zlib_ng.crc32_combine(crc, piece.crc, piece.size)
        size += piece.size
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, *(p.data for p in pieces), _FINAL_EMPTY_BLOCK, trailer))


def json_body_response(encoded: EncodedBody) -> Response:
    headers = {"Vary": "Accept-Encoding"}
    if encoded.gzipped:
        headers["Content-Encoding"] = "gzip"
    return Response(encoded.content, media_type="application/json", headers=headers)
