"""A plain UTF-8 file's records read as the file's own lines, a chunk at a time: a chunk
a regular expression confirms (inference.batch_confirmation with the delimiter) is only
counted, any other parsed by the CSV reader, as `reader.read_csv` would have.

Pass 1 spent most of its time in Python's CSV reader building a million lists of
strings that the confirmation then joined again. Matching the file's bytes directly
runs at C speed; a chunk is cut after a line feed, so no record spans two chunks unless
a quoted value holds a line break, which the CSV reader finds (the chunk ends inside a
quoted value) and the rest of the file is then read as `read_csv` reads it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import IO

from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import LoadError
from tally.services.loader.decoding import UTF8_BOM
from tally.services.loader.reader import (
    BATCH_ROWS,
    RAW_CHUNK_BYTES,
    Batch,
    FileFormat,
    Records,
    open_bytes,
    position_of,
    reading_error,
)


@dataclass(frozen=True)
class Counted:
    """Lines of the file that the confirmation matched: `rows` records, none blank."""

    rows: int
    offset: int  # bytes of the file (as stored) read so far, for progress


def reads_chunks(file_format: FileFormat) -> bool:
    """Can the file's lines be matched as they are? Its bytes must be its rows (no
    layout), in UTF-8, and no value may pass the cell limit unseen: a line cannot hold a
    longer value than its own limit."""
    limits = file_format.limits
    return (
        file_format.layout.plain
        and file_format.encoding == DEFAULT_ENCODING
        and limits.max_cell_bytes >= limits.max_line_bytes
    )


def _never(_chunk: bytes) -> bool:
    return False


class ChunkRecords:
    """The records after the header, as `Counted` chunks (those `confirms` matches) or
    parsed `Batch`es; counts the blank lines, as `reader.Records` does."""

    def __init__(
        self,
        path: Path,
        file_format: FileFormat,
        header: list[str],
        handle: IO[bytes],
    ) -> None:
        self._path = path
        self._format = file_format
        self.header = header
        self._handle = handle
        self._rest = b""  # bytes read, not yet in a chunk
        self.confirms: Callable[[bytes], bool] = _never  # set by the reader's user
        self._position = position_of(handle)
        self._lines = 1  # lines before the next chunk, as the CSV reader counts them
        self.blank_lines = 0

    def __iter__(self) -> Iterator[Counted | Batch]:
        for chunk in self._chunks():
            if self.confirms(chunk):
                rows = chunk.count(b"\n") + (not chunk.endswith(b"\n"))
                self._lines += rows
                yield Counted(rows, self._position())
                continue
            try:
                batches = self._parsed(chunk)
            except _UnfinishedRecordError:
                yield from self._read_on(chunk)
                return
            yield from batches

    def _chunks(self) -> Iterator[bytes]:
        """Whole lines, up to RAW_CHUNK_BYTES of them (a longer line whole: the line
        limit bounds it); the file's last line even without its line feed."""
        rest = self._rest
        while piece := self._handle.read(RAW_CHUNK_BYTES):
            data = rest + piece if rest else piece
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data  # one line longer than a piece (bounded by the line limit)
                continue
            rest = data[cut:]
            self._rest = rest  # for `_read_on`, should the next chunk need it
            yield data[:cut]
        self._rest = b""
        if rest:
            yield rest

    def _parsed(self, chunk: bytes) -> list[Batch]:
        """The chunk's records, checked as `reader.Records` checks them; _UnfinishedRecordError
        when the chunk may end inside a quoted value (a record spanning chunks)."""
        reader = csv.reader(
            io.StringIO(chunk.decode(), newline=""), delimiter=self._format.delimiter, strict=True
        )
        width, lines = len(self.header), self._lines
        batches = [Batch([], [])]
        try:
            for row in reader:
                if not row:
                    self.blank_lines += 1
                    continue
                if len(row) != width:
                    raise LoadError(
                        f"expected {width} fields, found {len(row)}", line=lines + reader.line_num
                    )
                if len(batches[-1].rows) >= BATCH_ROWS:
                    batches.append(Batch([], []))
                batches[-1].rows.append(row)
                batches[-1].lines.append(lines + reader.line_num)
        except csv.Error:
            raise _UnfinishedRecordError from None  # or malformed: `read_csv` says where
        self._lines += reader.line_num
        for batch in batches:
            batch.offset = self._position()
        return [batch for batch in batches if batch.rows]

    def _read_on(self, chunk: bytes) -> Iterator[Batch]:
        """The rest of the file from `chunk` on, read as `reader.read_csv` reads it."""
        pieces = chain([chunk, self._rest], iter(lambda: self._handle.read(RAW_CHUNK_BYTES), b""))
        text = io.TextIOWrapper(io.BufferedReader(_Joined(pieces)), encoding="utf-8", newline="")
        reader = csv.reader(text, delimiter=self._format.delimiter, strict=True)
        records = Records(reader, len(self.header), self._position, self.blank_lines)
        records.offset = self._lines
        records.explain = lambda exc, line: reading_error(
            self._path, self._format, exc, line, self.header
        )
        yield from records
        self.blank_lines = records.blank_lines


class _UnfinishedRecordError(Exception):
    """The CSV reader could not end the chunk's last record."""


class _Joined(io.RawIOBase):
    """Byte pieces read as one stream."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        super().__init__()
        self._pieces = pieces
        self._held = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._held:
            piece = next(self._pieces, None)
            if piece is None:
                return 0
            self._held = piece
        size = min(len(buffer), len(self._held))
        buffer[:size] = self._held[:size]
        self._held = self._held[size:]
        return size


@contextmanager
def read_chunks(path: Path, file_format: FileFormat) -> Iterator[ChunkRecords | None]:
    """The file's records as chunks its `confirms` may count without parsing them; None when
    the file is not read so (`reads_chunks`), or its first line is not a header the
    CSV reader would read alike (blank, quoted, a carriage return), or holds one value
    (a single column's empty value and a blank line look alike)."""
    if not reads_chunks(file_format):
        yield None
        return
    csv.field_size_limit(file_format.limits.max_cell_bytes)
    with open_bytes(path, file_format.compressed, file_format.limits) as handle:
        line = handle.readline().removeprefix(UTF8_BOM)  # within the header limit: scanned
        header = line.removesuffix(b"\n").decode().split(file_format.delimiter)
        if not line.endswith(b"\n") or b'"' in line or b"\r" in line or len(header) < 2:
            yield None
            return
        yield ChunkRecords(path, file_format, header, handle)
