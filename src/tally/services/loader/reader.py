"""Reading a CSV file as published: gzip or not, UTF-8 (BOM or not) or Latin-1, and
comma, semicolon, tab or pipe separated. Streams batches of rows with line numbers,
so memory stays flat whatever the file's size.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tally.core.errors import LoadError

GZIP_MAGIC = b"\x1f\x8b"
DELIMITERS = (",", ";", "\t", "|")
SNIFF_BYTES = 64 * 1024
SNIFF_LINES = 20
BATCH_ROWS = 10_000
# A single field may be large, but not unbounded: a stray quote would otherwise swallow
# the rest of a 1 GB file into one value.
MAX_FIELD_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class FileFormat:
    """How to read the bytes: decided once, before the first pass."""

    compressed: bool
    encoding: str  # "utf-8-sig" or "latin-1"
    delimiter: str


@dataclass
class Batch:
    rows: list[list[str]]
    lines: list[int]  # the line each row ends on, for error messages
    offset: int = 0  # bytes of the file (as stored) read so far, for progress


def _open_bytes(path: Path, compressed: bool) -> IO[bytes]:
    return gzip.open(path, "rb") if compressed else path.open("rb")


def _is_gzip(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def _is_utf8(path: Path, compressed: bool) -> bool:
    """Decode the whole file incrementally; Latin-1 only if UTF-8 truly fails."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with _open_bytes(path, compressed) as handle:
            while chunk := handle.read(1 << 20):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    except (OSError, EOFError) as exc:
        raise LoadError(f"the file cannot be read: {exc}") from exc
    return True


def _sniff_delimiter(sample: str) -> str:
    """The candidate that splits the first lines into the most, equally many, fields."""
    best, best_fields = ",", 1
    lines = sample.splitlines(keepends=True)[:SNIFF_LINES]
    if len(lines) > 1 and not sample.endswith(("\n", "\r")):
        lines = lines[:-1]  # the sample may end mid-record
    for delimiter in DELIMITERS:
        try:
            widths = {
                len(r) for r in csv.reader(io.StringIO("".join(lines)), delimiter=delimiter) if r
            }
        except csv.Error:
            continue
        if len(widths) == 1 and (fields := widths.pop()) > best_fields:
            best, best_fields = delimiter, fields
    return best


def detect_format(path: Path) -> FileFormat:
    compressed = _is_gzip(path)
    encoding = "utf-8-sig" if _is_utf8(path, compressed) else "latin-1"
    with _open_bytes(path, compressed) as handle:
        sample = handle.read(SNIFF_BYTES).decode(encoding, errors="ignore")
    return FileFormat(compressed, encoding, _sniff_delimiter(sample))


UTF8_BOM = b"\xef\xbb\xbf"
RAW_CHUNK_BYTES = 1 << 20


def raw_chunks(path: Path, file_format: FileFormat) -> Iterator[bytes]:
    """The file's bytes as published (decompressed, without a BOM), in chunks."""
    with _open_bytes(path, file_format.compressed) as handle:
        first = handle.read(RAW_CHUNK_BYTES)
        yield first[3:] if first.startswith(UTF8_BOM) else first
        while chunk := handle.read(RAW_CHUNK_BYTES):
            yield chunk


@contextmanager
def read_csv(path: Path, file_format: FileFormat) -> Iterator[tuple[list[str], Iterator[Batch]]]:
    """One pass over the file: its header, and its records in batches."""
    csv.field_size_limit(MAX_FIELD_BYTES)
    with _open_bytes(path, file_format.compressed) as raw:
        text = io.TextIOWrapper(raw, encoding=file_format.encoding, newline="")
        reader = csv.reader(text, delimiter=file_format.delimiter, strict=True)
        try:
            header = next(reader, None)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise LoadError(f"malformed CSV: {exc}", line=reader.line_num or 1) from exc
        if header is None:
            raise LoadError("the file is empty: a header line is required", line=1)
        stored = raw.fileobj if isinstance(raw, gzip.GzipFile) else raw
        yield header, _batches(reader, len(header), stored)


def _batches(reader: Any, width: int, stored: Any) -> Iterator[Batch]:
    batch = Batch([], [])
    try:
        for row in reader:
            if not row:
                continue  # a blank line holds no record
            if len(row) != width:
                raise LoadError(f"expected {width} fields, found {len(row)}", line=reader.line_num)
            batch.rows.append(row)
            batch.lines.append(reader.line_num)
            if len(batch.rows) >= BATCH_ROWS:
                batch.offset = stored.tell()
                yield batch
                batch = Batch([], [])
    except (csv.Error, UnicodeDecodeError) as exc:
        raise LoadError(f"malformed CSV: {exc}", line=reader.line_num + 1) from exc
    if batch.rows:
        batch.offset = stored.tell()
        yield batch
