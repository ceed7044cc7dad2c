"""A file's bytes read strictly in one encoding: the first bytes that are not valid in it
are placed by line and byte offset, and nothing is ever read in another encoding
(decision 0015). Also the text as UTF-8, the one encoding PostgreSQL's COPY is sent.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from tally.core.encodings import DEFAULT_ENCODING
from tally.core.errors import LoadError

UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")

# The file's bytes, from the start, each time it is called (after gzip decompression).
Pieces = Callable[[], Iterable[bytes]]


def codec_of(encoding: str) -> str:
    """The codec that reads a file declared in `encoding`: UTF-8's reads and drops an
    optional byte-order mark (UTF-16's and UTF-32's codecs read theirs already)."""
    return "utf-8-sig" if encoding == DEFAULT_ENCODING else encoding


@dataclass
class TextFacts:
    """What one pass over the decoded text found."""

    has_nul: bool = False
    has_quotes: bool = False


def check_text(pieces: Pieces, encoding: str) -> TextFacts:
    """Decode the whole file strictly. LoadError at the first bytes that are not valid in
    `encoding`, naming their line and byte offset; where that is, is only worked out then,
    so a valid file costs one decoding pass."""
    decoder = codecs.getincrementaldecoder(codec_of(encoding))()
    found = TextFacts()
    fed = 0
    try:
        for piece in pieces():
            fed += len(piece)
            text = decoder.decode(piece)
            found.has_nul = found.has_nul or "\x00" in text
            found.has_quotes = found.has_quotes or '"' in text
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        # The decoder failed on the end of what it was fed (bytes held over from the
        # piece before, and this piece), less a byte-order mark it dropped.
        offset = fed - len(error.object) + error.start
        raise _invalid_text(pieces, encoding, offset, error) from None
    return found


def _invalid_text(
    pieces: Pieces, encoding: str, offset: int, error: UnicodeDecodeError
) -> LoadError:
    name = "UTF-8" if encoding == DEFAULT_ENCODING else encoding
    byte = error.object[error.start]
    message = (
        f"the file is not valid {name}: byte 0x{byte:02x} at byte offset {offset} "
        f"cannot be decoded ({error.reason})"
    )
    if encoding == DEFAULT_ENCODING:
        first = next(iter(pieces()), b"")
        hint = "utf-16" if offset == 0 and first.startswith(_UTF16_BOMS) else "e.g. cp1252"
        message += (
            "; it starts with a UTF-16 byte-order mark: declare the source's encoding as utf-16"
            if hint == "utf-16"
            else "; declare the source's encoding if its files are not UTF-8 (e.g. cp1252)"
        )
    return LoadError(message, line=_line_at(pieces, encoding, offset))


def _line_at(pieces: Pieces, encoding: str, offset: int) -> int:
    """The line the byte at `offset` is on, counted as the CSV reader counts them: `\\n`,
    `\\r\\n` and a lone `\\r` each end one. The bytes before it are valid text."""
    decoder = codecs.getincrementaldecoder(codec_of(encoding))()
    breaks, left, after_cr = 0, offset, False
    for piece in pieces():
        part = piece[:left]
        left -= len(part)
        text = decoder.decode(part, final=left == 0)
        breaks += text.count("\n") + text.count("\r") - text.count("\r\n")
        if after_cr and text.startswith("\n"):
            breaks -= 1  # a "\r\n" split between two pieces ends one line
        after_cr = text.endswith("\r") if text else after_cr
        if left == 0:
            break
    return breaks + 1


def utf8_pieces(pieces: Iterable[bytes], encoding: str) -> Iterator[bytes]:
    """The file's text as UTF-8, without a byte-order mark. A UTF-8 file's bytes are
    passed on as they are; any other is decoded and encoded again on the way."""
    if encoding == DEFAULT_ENCODING:
        chunks = iter(pieces)
        head = b""
        while len(head) < len(UTF8_BOM) and (piece := next(chunks, None)) is not None:
            head += piece
        yield head.removeprefix(UTF8_BOM)
        yield from chunks
        return
    decoder = codecs.getincrementaldecoder(encoding)()
    for piece in pieces:
        yield decoder.decode(piece).encode()
    yield decoder.decode(b"", final=True).encode()
