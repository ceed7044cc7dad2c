"""The character encodings a source's files may be declared in: names only (pure).

Any spelling Python's codec registry knows is folded to the codec's own name, and only
encodings files are written in are accepted (the registry also holds transforms such as
`rot13` and `base64`, and encodings of other things such as `idna`).
"""

from __future__ import annotations

import codecs

DEFAULT_ENCODING = "utf-8"
NAME_MAX_CHARS = 50  # the longest codec alias is far shorter

FILE_ENCODINGS = frozenset(
    {
        "utf-8",
        *(f"utf-{bits}{order}" for bits in (16, 32) for order in ("", "-le", "-be")),
        "ascii",
        *(f"iso8859-{part}" for part in range(1, 17) if part != 12),  # there is no -12
        "cp874",
        *(f"cp125{page}" for page in range(9)),
        *("cp437", "cp850", "cp852", "cp858", "cp866", "koi8-r", "koi8-u", "mac-roman"),
        *("shift_jis", "cp932", "euc_jp", "euc_kr", "cp949"),
        *("gb2312", "gbk", "gb18030", "big5", "big5hkscs"),
    }
)
# Spellings the documentation tells users to send that are not a codec's own name: the
# OpenAPI document lists them beside FILE_ENCODINGS, so that a client generated from it
# may send them (any other spelling Python knows is still taken).
DOCUMENTED_SPELLINGS = frozenset({"latin-1"})
# Spellings of UTF-8 whose codec is another: the optional byte-order mark is always read.
_UTF8_ALIASES = {"utf-8-sig": DEFAULT_ENCODING}


class UnknownEncodingError(ValueError):
    """Not the name of an encoding files are written in."""


def canonical_encoding(name: str) -> str:
    """The codec's own name for `name` (`latin-1` -> `iso8859-1`); UnknownEncodingError
    when it names no encoding a file may be in."""
    try:
        codec = codecs.lookup(name).name if len(name) <= NAME_MAX_CHARS else ""
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        codec = ""
    codec = _UTF8_ALIASES.get(codec, codec)
    if codec not in FILE_ENCODINGS:
        raise UnknownEncodingError(
            f"unknown encoding {name[:NAME_MAX_CHARS]!r}: use the name of a character "
            "encoding, e.g. utf-8, latin-1, cp1252 or utf-16"
        )
    return codec
