"""A file's bytes read strictly in one encoding: the first bytes that are not valid in it
are placed by line and byte offset, and nothing is ever read in another encoding
(decision 0015). Also the text as UTF-8, the one encoding PostgreSQL's COPY is sent.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator

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


class StrictDecoder:
    """Decodes a file piece by piece in its declared encoding. The first bytes that are
    not valid raise LoadError naming their line and byte offset; only then is the file
    read again (`again`), to count the lines before them."""

    def __init__(self, encoding: str, again: Pieces) -> None:
        self.encoding = encoding
        self._again = again
        self._decoder = codecs.getincrementaldecoder(codec_of(encoding))()
        self._fed = 0

    def decode(self, piece: bytes, *, final: bool = False) -> str:
        self._fed += len(piece)
        try:
            return self._decoder.decode(piece, final)
        except UnicodeDecodeError as error:
            # The decoder failed on the end of what it was fed (bytes held over from the
            # piece before, and this one), less a byte-order mark it dropped.
            offset = self._fed - len(error.object) + error.start
            raise self._invalid(offset, error) from None

    def _invalid(self, offset: int, error: UnicodeDecodeError) -> LoadError:
        utf8 = self.encoding == DEFAULT_ENCODING
        message = (
            f"the file is not valid {'UTF-8' if utf8 else self.encoding}: byte "
            f"0x{error.object[error.start]:02x} at byte offset {offset} cannot be decoded "
            f"({error.reason})"
        )
        if utf8 and offset == 0 and error.object.startswith(_UTF16_BOMS):
            message += "; it starts with a UTF-16 byte-order mark: declare the encoding utf-16"
        elif utf8:
            message += "; declare the source's encoding if its files are not UTF-8 (e.g. cp1252)"
        return LoadError(message, line=_line_at(self._again, self.encoding, offset))


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
