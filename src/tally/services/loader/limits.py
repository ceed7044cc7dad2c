"""What a file may be: its limits, checked while its bytes stream past, before anything
is built from them (issue #14).

A gzip file is limited by what it expands to (size and ratio), so a bomb fails within
its first megabytes; a line, the header and a value are limited in length, and the
header in columns, so no table, regular expression or statement larger than the
databases and libraries take is ever attempted. Each refusal is a LoadError naming the
setting to raise and, where there is one, the line and column at fault.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import IO

from tally.core.errors import LoadError
from tally.core.limits import MIB, FileLimits
from tally.storage.db_errors import refusal_as_load_error

# A small gzip may expand a lot and be harmless (a few repeated rows); the ratio is judged
# once this much has come out of it.
RATIO_CHECK_MIN_BYTES = 8 * MIB
SCAN_CHUNK_BYTES = MIB


class LimitedGzip(io.RawIOBase):
    """A gzip file's decompressed bytes, refused past `max_file_bytes` or past
    `max_compression_ratio` times the compressed bytes read so far."""

    def __init__(self, stored: IO[bytes], limits: FileLimits) -> None:
        super().__init__()
        self._stored = stored
        self._gzip = gzip.GzipFile(fileobj=stored, mode="rb")
        self._limits = limits
        self.decompressed = 0

    def readable(self) -> bool:
        return True

    def stored_position(self) -> int:
        """Bytes of the file as stored read so far (for progress)."""
        return self._stored.tell()

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        size = self._gzip.readinto(buffer)
        self.decompressed += size
        self._check()
        return size

    def _check(self) -> None:
        limits = self._limits
        if self.decompressed > limits.max_file_bytes:
            raise LoadError(
                f"the file is larger than the limit of {limits.max_file_bytes} bytes once "
                "decompressed (TALLY_MAX_FILE_BYTES)"
            )
        stored = max(1, self._stored.tell())
        if (
            self.decompressed > RATIO_CHECK_MIN_BYTES
            and self.decompressed > stored * limits.max_compression_ratio
        ):
            raise LoadError(
                f"the file expands more than {limits.max_compression_ratio:g} times when "
                "decompressed, as a compression bomb does (TALLY_MAX_COMPRESSION_RATIO)"
            )

    def close(self) -> None:
        try:
            self._gzip.close()
            self._stored.close()
        finally:
            super().close()


class LineMeter:
    """Measures the lines of a file's text in UTF-8 (a UTF-8 file's bytes as they are),
    chunk by chunk, at C speed: the header line against `max_header_bytes`, every other
    against `max_line_bytes`. In UTF-8 a line break is a byte no other character holds,
    so lines are counted exactly whatever the file's encoding (in UTF-16, `\\n`'s byte is
    half of many characters), and a UTF-16 line counts as long as the same text in UTF-8
    (not twice that). No piece measured exceeds the line limit, so only a line that
    spans pieces can be too long."""

    def __init__(self, limits: FileLimits) -> None:
        self._limits = limits
        self._newline: bytes | None = None
        self._run = 0  # bytes since the last line break
        self._breaks = 0  # line breaks seen

    @property
    def chunk_bytes(self) -> int:
        return max(1, min(SCAN_CHUNK_BYTES, self._limits.max_line_bytes))

    def feed(self, chunk: bytes) -> None:
        """Measure the next bytes of UTF-8 text (a chunk grows when encoded as UTF-8)."""
        step = self.chunk_bytes
        if len(chunk) <= step:
            self._feed(chunk)
        else:
            for start in range(0, len(chunk), step):
                self._feed(chunk[start : start + step])

    def _feed(self, chunk: bytes) -> None:
        if self._newline is None and (b"\n" in chunk or b"\r" in chunk):
            self._newline = b"\n" if b"\n" in chunk else b"\r"  # \r alone: old Mac files
        first = -1 if self._newline is None else chunk.find(self._newline)
        if first < 0:
            self._run += len(chunk)
            self._check(self._run)
            return
        self._check(self._run + first)  # the line that ends in this chunk
        newline = chunk[first : first + 1]
        self._breaks += 1 + chunk.count(newline, first + 1)
        self._run = len(chunk) - chunk.rfind(newline) - 1

    def _check(self, length: int) -> None:
        header = self._breaks == 0
        limit = self._limits.max_header_bytes if header else self._limits.max_line_bytes
        if length <= limit:
            return
        if header:
            raise LoadError(
                f"the header line is longer than the limit of {limit} bytes of UTF-8 "
                "text (TALLY_MAX_HEADER_BYTES)",
                line=1,
            )
        raise LoadError(
            f"the line is longer than the limit of {limit} bytes of UTF-8 text "
            "(TALLY_MAX_LINE_BYTES)",
            line=self._breaks + 1,
        )


def check_width(header: Sequence[str], limits: FileLimits) -> None:
    """The header has at most `max_columns` columns."""
    if len(header) > limits.max_columns:
        raise LoadError(
            f"the header has {len(header)} columns, more than the limit of "
            f"{limits.max_columns} (TALLY_MAX_COLUMNS)",
            line=1,
            column=header[limits.max_columns],
        )


def table_refused(width: int) -> AbstractContextManager[None]:
    """Around creating and filling the table of a file of `width` columns: the limits may
    be set above what the database takes, and its refusal then fails the file at once."""
    return refusal_as_load_error(f"the table for the file's {width} columns")


def value_too_long(limits: FileLimits, *, line: int, column: str | None) -> LoadError:
    return LoadError(
        f"a value is longer than the limit of {limits.max_cell_bytes} characters "
        "(TALLY_MAX_CELL_BYTES)",
        line=line,
        column=column,
    )


def long_field_index(text: Iterator[str], delimiter: str, limit: int) -> int | None:
    """The position of the first field longer than `limit` characters in the record
    that `text` starts with (None: none is); holds at most about `limit` characters."""
    separator = re.escape(delimiter)
    field = re.compile(f'(?:"(?:[^"]++|"")*+"|[^{separator}"\r\n]*)([{separator}\r\n])')
    buffer, position, index = "", 0, 0
    for piece in text:
        buffer = buffer[position:] + piece
        position = 0
        while found := field.match(buffer, position):
            if _value_length(buffer[position : found.start(1)]) > limit:
                return index
            if found.group(1) in "\r\n":
                return None
            index, position = index + 1, found.end()
        if len(buffer) - position > limit + 2:
            return index
    return index if _value_length(buffer[position:]) > limit else None


def _value_length(token: str) -> int:
    if token.startswith('"'):
        return len(token) - 2 - token.count('""')
    return len(token)
