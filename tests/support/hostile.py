"""Hostile and huge files, generated in the test and small on disk (issue #14).

A gzip bomb is built without compressing its gigabytes: a raw deflate piece that ends in
a full flush is byte-aligned and refers to nothing before it, so one compressed chunk
can be repeated as often as wanted (deflate's best is about 1000 to 1; 1 GiB of rows is
about 1 MB). Its CRC and length trailer are those of the real content, so a reader that
goes to the end finds a valid file.
"""

from __future__ import annotations

import gzip
import struct
import zlib

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # deflate, no name, unknown OS
BOMB_CHUNK_ROWS = 256 * 1024


def _deflated_piece(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH)


def gzip_bomb(decompressed_bytes: int, header: bytes = b"a,b\n", row: bytes = b"1,2\n") -> bytes:
    """A valid gzip file of a CSV whose rows fill about `decompressed_bytes`."""
    chunk = row * BOMB_CHUNK_ROWS
    repeats = max(1, decompressed_bytes // len(chunk))
    piece = _deflated_piece(chunk)
    crc = zlib.crc32(header)
    for _ in range(repeats):
        crc = zlib.crc32(chunk, crc)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    size = len(header) + len(chunk) * repeats
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return GZIP_HEADER + _deflated_piece(header) + piece * repeats + end + trailer


def wide_csv(columns: int, rows: int = 1, value: str = "1") -> bytes:
    """A CSV with `columns` columns named c0, c1, ... and `rows` rows of `value`."""
    header = ",".join(f"c{i}" for i in range(columns))
    line = ",".join([value] * columns)
    return (header + "\n" + (line + "\n") * rows).encode()


def ledger_csv(rows: int, start: int = 1) -> bytes:
    """`rows` rows of an ordinary ledger (id, amount, currency, booked_on), varied enough
    that gzip shrinks it the way it shrinks real files (about 4 to 1)."""
    lines = ["id,amount,currency,booked_on"]
    currencies = ("EUR", "USD", "GBP", "CHF")
    for n in range(start, start + rows):
        day = 1 + n % 28
        lines.append(f"{n},{n * 37 % 100000 / 100:.2f},{currencies[n % 4]},2024-02-{day:02d}")
    return ("\n".join(lines) + "\n").encode()


def gzipped(content: bytes) -> bytes:
    return gzip.compress(content, compresslevel=6)
