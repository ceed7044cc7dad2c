"""gzip for the Data API's bodies, with ISA-L (python-isal) instead of zlib.

A 10,000-row page is about 2 MB of JSON: zlib's fastest level takes ~25 ms for it,
ISA-L's ~7 ms for a smaller result. Starlette's GZipMiddleware still compresses the
other responses; it leaves a body that already has a Content-Encoding alone.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from isal import igzip, isal_zlib
from starlette.responses import Response

GZIP_LEVEL = 1  # ISA-L levels are 0-3; 1 is the best speed/size trade-off for JSON


def accepts_gzip(accept_encoding: str | None) -> bool:
    """gzip (or *) listed, and not with q=0."""
    for part in (accept_encoding or "").split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip()
        if not quality.startswith("q="):
            return True
        try:
            return float(quality[2:]) > 0
        except ValueError:
            return False
    return False


@dataclass(frozen=True)
class EncodedBody:
    """A JSON body as it goes on the wire; built where the query ran (it may be another
    process), so the compression is spent there too."""

    content: bytes
    gzipped: bool


def encode_json_body(body: bytes, *, accept_encoding: str | None, min_bytes: int) -> EncodedBody:
    if len(body) > min_bytes and accepts_gzip(accept_encoding):
        return EncodedBody(igzip.compress(body, GZIP_LEVEL), gzipped=True)
    return EncodedBody(body, gzipped=False)


@dataclass(frozen=True)
class DeflatedPiece:
    """Some bytes of a body compressed on their own: raw deflate ended by a sync flush,
    so pieces compressed in different processes can follow one another in one stream."""

    data: bytes
    crc: int  # CRC-32 of the uncompressed bytes
    size: int  # their length


def deflate_piece(data: bytes) -> DeflatedPiece:
    compressor = isal_zlib.compressobj(GZIP_LEVEL, isal_zlib.DEFLATED, -isal_zlib.MAX_WBITS)
    compressed = compressor.compress(data) + compressor.flush(isal_zlib.Z_SYNC_FLUSH)
    return DeflatedPiece(compressed, isal_zlib.crc32(data), len(data))


def inflate_piece(piece: DeflatedPiece) -> bytes:
    return isal_zlib.decompressobj(-isal_zlib.MAX_WBITS).decompress(piece.data)


# RFC 1952: magic, deflate, no flags, no time, no extra flags, unknown OS.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_FINAL_EMPTY_BLOCK = isal_zlib.compressobj(
    GZIP_LEVEL, isal_zlib.DEFLATED, -isal_zlib.MAX_WBITS
).flush(isal_zlib.Z_FINISH)


def gzip_of_pieces(pieces: Sequence[DeflatedPiece]) -> bytes:
    """One gzip member holding the pieces in order, without compressing anything again.
    Written here because no library joins deflate streams compressed apart: the pieces'
    blocks follow one another, an empty final block closes the stream, and the
    trailer's CRC-32 is combined from the pieces' own (RFC 1952)."""
    crc, size = 0, 0
    for piece in pieces:
        crc = isal_zlib.crc32_combine(crc, piece.crc, piece.size)
        size += piece.size
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, *(p.data for p in pieces), _FINAL_EMPTY_BLOCK, trailer))


def json_body_response(encoded: EncodedBody) -> Response:
    headers = {"Vary": "Accept-Encoding"}
    if encoded.gzipped:
        headers["Content-Encoding"] = "gzip"
    return Response(encoded.content, media_type="application/json", headers=headers)
