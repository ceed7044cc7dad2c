"""Reading a CSV file as published: gzip or not, in its source's encoding (UTF-8, BOM or
not, unless declared otherwise; strictly, see decoding.py), and comma, semicolon, tab
or pipe separated. Streams batches of rows with line numbers,
so memory stays flat whatever the file's size. The source's layout (core/formats.py)
skips its leading and trailing lines, and rewrites the values of columns declared with
a format into canonical text as each batch is read: every reader of the rows (the
checks, the appends) sees them as a clean file's.
"""

from __future__ import annotations

import csv
import io
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import IO, Any

from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import LoadError
from tally.core.formats import PLAIN_LAYOUT, Converter, FileLayout, FormatMisfitError, converter_of
from tally.core.limits import DEFAULT_FILE_LIMITS, FileLimits
from tally.services.loader.decoding import StrictDecoder, codec_of, utf8_pieces
from tally.services.loader.limits import LimitedGzip, LineMeter, long_field_index, value_too_long

GZIP_MAGIC = b"\x1f\x8b"
DELIMITERS = (",", ";", "\t", "|")
SNIFF_BYTES = 64 * 1024
SNIFF_LINES = 20
RAW_CHUNK_BYTES = 1 << 20
BATCH_ROWS = 10_000
READ_AGAIN_CHARS = 64 * 1024  # pieces of a record read again to find its long value


@dataclass(frozen=True)
class FileFormat:
    """How to read the bytes: decided once, before the first pass."""

    compressed: bool
    encoding: str  # the source's, as core.encodings names it
    delimiter: str
    has_quotes: bool = True  # a '"' anywhere in the file
    limits: FileLimits = DEFAULT_FILE_LIMITS
    layout: FileLayout = PLAIN_LAYOUT  # lines skipped, columns' formats (issue 32)

    @property
    def codec(self) -> str:
        return codec_of(self.encoding)


@dataclass
class Batch:
    rows: list[list[str]]
    lines: list[int]  # the line each row ends on, for error messages
    offset: int = 0  # bytes of the file (as stored) read so far, for progress
    # The rows as columns, when the reader asked for them (`read_csv(columns_only=True)`):
    # then they, not the rows, hold the declared columns rewritten.
    columns: list[tuple[str, ...]] | None = None


def open_bytes(path: Path, compressed: bool, limits: FileLimits) -> IO[bytes]:
    """The file's bytes; a gzip file's decompressed, within `limits` (size and ratio)."""
    if compressed:
        return io.BufferedReader(LimitedGzip(path.open("rb"), limits))
    return path.open("rb")


@dataclass
class _Scan:
    nul: bool = False
    quotes: bool = False
    head: str = ""  # the first SNIFF_BYTES characters, for the delimiter


def _scan(handle: IO[bytes], decoder: StrictDecoder, lines: LineMeter) -> _Scan:
    """One incremental pass over the whole file, decoded strictly: whether it holds a
    NUL or a quote character, and its head; its lines are measured on the way, in UTF-8
    (a gzip file's expansion is bounded by `handle`)."""
    found = _Scan()
    utf8 = decoder.encoding == DEFAULT_ENCODING
    try:
        while chunk := handle.read(lines.chunk_bytes):
            text = decoder.decode(chunk)
            lines.feed(chunk if utf8 else text.encode())
            if len(found.head) < SNIFF_BYTES:
                found.head += text[: SNIFF_BYTES - len(found.head)]
            found.nul = found.nul or "\x00" in text
            found.quotes = found.quotes or '"' in text
        decoder.decode(b"", final=True)
    except (OSError, EOFError) as exc:
        raise LoadError(f"the file cannot be read: {exc}") from exc
    return found


def _sniff_delimiter(sample: str) -> str:
    """The candidate that splits the header into more than one field and the first
    records into as many most often, then into the most fields: a ragged record must
    fail the load, not the sniff."""
    best, best_key = ",", (0, 1)
    lines = sample.splitlines(keepends=True)
    cut = len(lines) > SNIFF_LINES or not sample.endswith(("\n", "\r"))
    text = "".join(lines[:SNIFF_LINES])
    for delimiter in DELIMITERS:
        try:
            rows = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r]
        except csv.Error:
            continue
        if cut and len(rows) > 1:
            rows.pop()  # the sample may end inside the last record (a quoted newline)
        fields = len(rows[0]) if rows else 0
        key = (sum(len(r) == fields for r in rows), fields)
        if fields > 1 and 2 * key[0] >= len(rows) and key > best_key:
            best, best_key = delimiter, key
    return best


def detect_format(
    path: Path,
    encoding: str = DEFAULT_ENCODING,
    limits: FileLimits = DEFAULT_FILE_LIMITS,
    layout: FileLayout = PLAIN_LAYOUT,
) -> FileFormat:
    """The file's format, from one read of it: the gzip magic, then the whole
    (decompressed) stream decoded in `encoding` and checked against `limits`. LoadError
    at the first bytes that are not valid in it (their line and byte offset), at a NUL
    character, or at the first limit exceeded."""
    with path.open("rb") as stored:
        compressed = stored.read(len(GZIP_MAGIC)) == GZIP_MAGIC
        stored.seek(0)
        handle = io.BufferedReader(LimitedGzip(stored, limits)) if compressed else stored
        decoder = StrictDecoder(encoding, lambda: _pieces(path, compressed, limits))
        with handle:
            found = _scan(handle, decoder, LineMeter(limits))
    delimiter = _sniff_delimiter(_after_leading_lines(found.head, layout.skip_leading_lines))
    file_format = FileFormat(compressed, encoding, delimiter, found.quotes, limits, layout)
    if found.nul:
        raise _nul_error(path, file_format)
    return file_format


def _after_leading_lines(head: str, lines: int) -> str:
    """The head without the layout's leading lines (a bank's preamble says nothing of the
    delimiter), counted as `read_csv` counts them: not str.splitlines, which also ends a
    line at a form feed, U+0085 or U+2028 a preamble line may hold."""
    text = io.StringIO(head, newline="")
    for _ in range(lines):
        text.readline()
    return text.read()


def _nul_error(path: Path, file_format: FileFormat) -> LoadError:
    # PostgreSQL cannot store the character; in a UTF-8 file it marks a UTF-16 one
    utf16 = " (is the file UTF-16?)" if file_format.encoding == DEFAULT_ENCODING else ""
    reason = f"a NUL character is not allowed{utf16}"
    with read_csv(path, file_format) as (header, batches):
        if any("\x00" in name for name in header):
            return LoadError(reason, line=1)
        for batch in batches:
            for row, line in zip(batch.rows, batch.lines, strict=True):
                for name, value in zip(header, row, strict=True):
                    if "\x00" in value:
                        return LoadError(reason, line=line, column=name)
    return LoadError(reason)  # pragma: no cover - the scan found one


def _pieces(path: Path, compressed: bool, limits: FileLimits) -> Iterator[bytes]:
    with open_bytes(path, compressed, limits) as handle:
        while chunk := handle.read(RAW_CHUNK_BYTES):
            yield chunk


def utf8_chunks(path: Path, file_format: FileFormat) -> Iterator[bytes]:
    """The file's text as UTF-8 without a byte-order mark (what PostgreSQL's COPY is
    sent), in chunks: a UTF-8 file's bytes as published, decompressed."""
    pieces = _pieces(path, file_format.compressed, file_format.limits)
    return utf8_pieces(pieces, file_format.encoding)


def layout_chunks(path: Path, file_format: FileFormat) -> Iterator[bytes]:
    """`utf8_chunks` without the layout's leading lines and its trailing lines (blank
    lines at the end aside): what COPY is sent of a file whose source skips lines. A
    quoted newline among the trailing lines makes COPY read other rows than the loader's
    reader; the row count tells, and the rows the checks saw are sent instead."""
    layout = file_format.layout
    chunks = utf8_chunks(path, file_format)
    if layout.skip_leading_lines:
        chunks = _without_leading(chunks, layout.skip_leading_lines)
    if layout.skip_trailing_lines:
        chunks = _without_trailing(chunks, layout.skip_trailing_lines)
    return chunks


def _without_leading(chunks: Iterator[bytes], lines: int) -> Iterator[bytes]:
    for chunk in chunks:
        while lines and chunk:
            end = chunk.find(b"\n")
            if end < 0:
                chunk = b""  # the line goes on in the next chunk
            else:
                chunk, lines = chunk[end + 1 :], lines - 1
        if chunk:
            yield chunk


def _without_trailing(chunks: Iterator[bytes], lines: int) -> Iterator[bytes]:
    """The text less its last `lines` non-blank lines and every blank line among or
    after them (the loader's reader drops as many records)."""
    held: deque[bytes] = deque()  # lines that may be among the last ones
    filled = 0  # non-blank lines held
    partial = b""

    def release() -> Iterator[bytes]:
        nonlocal filled
        while filled > lines:  # the first held line is surely not among the last
            line = held.popleft()
            filled -= 1 if line.strip() else 0
            yield line + b"\n"

    for chunk in chunks:
        parts = (partial + chunk).split(b"\n")
        partial = parts.pop()
        out: list[bytes] = []
        for line in parts:
            held.append(line)
            filled += 1 if line.strip() else 0
            out.extend(release())
        if out:
            yield b"".join(out)
    if partial.strip():
        held.append(partial)
        filled += 1
        yield b"".join(release())


@dataclass(frozen=True)
class FileHead:
    """The header and the first batches of records: what is known of a file before its
    first pass."""

    header: list[str]
    batches: list[Batch]


def read_head(path: Path, file_format: FileFormat, *, batches: int) -> FileHead:
    with read_csv(path, file_format) as (header, records):
        return FileHead(header, list(islice(records, batches)))


@contextmanager
def read_csv(
    path: Path, file_format: FileFormat, *, columns_only: bool = False
) -> Iterator[tuple[list[str], Records]]:
    """One pass over the file: its header, and its records in batches. Blank lines,
    before the header too, hold no record. The layout's leading lines are skipped before
    the header, its trailing records after the last batch's; line numbers are the
    file's own."""
    csv.field_size_limit(file_format.limits.max_cell_bytes)
    layout = file_format.layout
    with open_bytes(path, file_format.compressed, file_format.limits) as raw:
        text = io.TextIOWrapper(raw, encoding=file_format.codec, newline="")
        skipped = 0
        try:
            while skipped < layout.skip_leading_lines and text.readline():
                skipped += 1
        except UnicodeDecodeError as exc:
            raise reading_error(path, file_format, exc, skipped + 1, None) from exc
        reader = csv.reader(text, delimiter=file_format.delimiter, strict=True)
        header: list[str] | None = []
        start, blank_lines = skipped + 1, -1
        try:
            while header == []:
                start, blank_lines = skipped + reader.line_num + 1, blank_lines + 1
                header = next(reader, None)
        except (csv.Error, UnicodeDecodeError) as exc:
            raise reading_error(path, file_format, exc, start, None) from exc
        if header is None:
            raise LoadError("the file is empty: a header line is required", line=skipped + 1)
        records = Records(reader, len(header), position_of(raw), blank_lines)
        records.offset = skipped
        records.trailing = layout.skip_trailing_lines
        records._blanks_at = []
        records.converters = _converters(header, layout)
        records.columns_only = columns_only
        records.explain = lambda exc, line: reading_error(path, file_format, exc, line, header)
        yield header, records


def _converters(header: list[str], layout: FileLayout) -> list[tuple[int, str, Converter]]:
    """(position, name, converter) of each column of the header declared with a format."""
    formats = dict(layout.formats)
    return [
        (i, name, converter_of(formats[name])) for i, name in enumerate(header) if name in formats
    ]


class Records:
    """The records after the header, in batches; counts the blank lines it skips (the
    PostgreSQL loader's COPY reads those differently). `offset` lines were skipped
    before the header; the last `trailing` records are held back and dropped; the
    `converters`' columns are rewritten into canonical text, batch by batch."""

    offset = 0
    trailing = 0
    columns_only = False  # the reader wants `Batch.columns` (rewritten), not the rows
    _blanks_at: list[int]  # the lines of the blank lines after the header
    converters: list[tuple[int, str, Converter]] = []  # noqa: RUF012 - replaced, never changed

    def __init__(
        self, reader: Any, width: int, position: Callable[[], int], blank_lines: int
    ) -> None:
        self._reader = reader
        self._width = width
        self._position = position
        self.blank_lines = blank_lines
        self.explain: Callable[[Exception, int], LoadError] = _malformed

    def __iter__(self) -> Iterator[Batch]:
        if self.trailing:
            yield from self._converted(self._held_back())
        else:
            yield from self._converted(self._records())

    def _records(self) -> Iterator[Batch]:
        reader, width, offset = self._reader, self._width, self.offset
        batch = Batch([], [])
        start = offset + reader.line_num + 1  # where the record being read begins
        blanks_at = self._blanks_at if self.trailing else None
        try:
            for row in reader:
                if not row:  # a blank line holds no record
                    self.blank_lines += 1
                    if blanks_at is not None:  # where, for `_held_back`
                        blanks_at.append(offset + reader.line_num)
                    start = offset + reader.line_num + 1
                    continue
                if len(row) != width and not self.trailing:
                    raise LoadError(
                        f"expected {width} fields, found {len(row)}",
                        line=offset + reader.line_num,
                    )
                batch.rows.append(row)
                batch.lines.append(offset + reader.line_num)
                if len(batch.rows) >= BATCH_ROWS:
                    batch.offset = self._position()
                    yield batch
                    batch = Batch([], [])
                start = offset + reader.line_num + 1
        except (csv.Error, UnicodeDecodeError) as exc:
            raise self.explain(exc, start) from exc
        if batch.rows:
            batch.offset = self._position()
            yield batch

    def _held_back(self) -> Iterator[Batch]:
        """The records but the last `trailing` (a bank's totals: any number of fields),
        each checked for its width once it is known not to be one of those. Batch by
        batch: the few records held back are carried into the next one."""
        width, trailing = self._width, self.trailing
        held_rows: list[list[str]] = []
        held_lines: list[int] = []
        blank_lines, last_kept = self.blank_lines, 0
        for batch in self._records():
            rows, lines = held_rows + batch.rows, held_lines + batch.lines
            cut = len(rows) - trailing
            rows, held_rows = rows[: max(cut, 0)], rows[max(cut, 0) :]
            lines, held_lines = lines[: max(cut, 0)], lines[max(cut, 0) :]
            if not rows:
                continue
            if set(map(len, rows)) != {width}:
                index = next(i for i, row in enumerate(rows) if len(row) != width)
                found = len(rows[index])
                raise LoadError(f"expected {width} fields, found {found}", line=lines[index])
            last_kept = lines[-1]
            yield Batch(rows, lines, batch.offset)
        # blank lines before the last record kept: the bytes COPY is sent end there
        self.blank_lines = blank_lines + sum(1 for line in self._blanks_at if line < last_kept)

    def _converted(self, batches: Iterator[Batch]) -> Iterator[Batch]:
        """The batches with the declared columns rewritten. For the checks
        (`columns_only`) the rows are turned into columns once, at C speed, and the
        rewritten columns kept on the batch, its rows left as read; for the appends each
        declared column is taken out of the rows and put back (0.1 s a million rows)."""
        if not self.converters:
            yield from batches
            return
        for batch in batches:
            rows = batch.rows
            columns = list(zip(*rows, strict=True)) if self.columns_only else None
            for position, name, converter in self.converters:
                values = columns[position] if columns else [row[position] for row in rows]
                try:
                    converted = converter.convert(values)
                except FormatMisfitError as misfit:
                    raise LoadError(
                        misfit.reason, line=batch.lines[misfit.index], column=name
                    ) from None
                if columns:
                    columns[position] = tuple(converted)
                else:
                    for row, value in zip(rows, converted, strict=True):
                        row[position] = value
            batch.columns = columns
            yield batch


def position_of(raw: IO[bytes]) -> Callable[[], int]:
    """Bytes of the file as stored read so far, for progress."""
    inner = getattr(raw, "raw", None)
    return inner.stored_position if isinstance(inner, LimitedGzip) else raw.tell


def _malformed(exc: Exception, line: int) -> LoadError:
    return LoadError(f"malformed CSV: {exc}", line=line)


def reading_error(
    path: Path, file_format: FileFormat, exc: Exception, line: int, header: list[str] | None
) -> LoadError:
    """The reader's error as a LoadError; a value over the cell limit names its column,
    found by reading that record again in bounded pieces."""
    if "field larger than field limit" not in str(exc):
        return _malformed(exc, line)
    limits = file_format.limits
    with open_bytes(path, file_format.compressed, limits) as raw:
        text = io.TextIOWrapper(raw, encoding=file_format.codec, newline="")
        for _ in range(line - 1):
            text.readline()
        pieces = iter(lambda: text.read(READ_AGAIN_CHARS), "")
        index = long_field_index(pieces, file_format.delimiter, limits.max_cell_bytes)
    column = None
    if header is not None and index is not None and index < len(header):
        column = header[index]
    return value_too_long(limits, line=line, column=column)
