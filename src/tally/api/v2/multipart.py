"""The one `file` part of a multipart/form-data upload, streamed out of the request body.

HTTP parsing stays here, in the HTTP layer; services/uploads.py stages the bytes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from tally.core.errors import InvalidUploadError
from tally.core.names import FILENAME_MAX_CHARS, has_control_characters

MULTIPART_OVERHEAD_BYTES = 64 * 1024  # part headers and boundaries beyond the file


class MultipartFile:
    """The bytes of the one part named `file` of a multipart/form-data body, streamed.

    Any other part is refused, like an extra field of a JSON body."""

    def __init__(self, chunks: Iterable[bytes], boundary: bytes) -> None:
        self.filename: str | None = None
        self._chunks = chunks
        self._out: list[bytes] = []
        self._header, self._disposition = [b"", b""], b""
        self._in_file = self._ended = False
        self._parser = MultipartParser(
            boundary,
            {
                "on_header_field": partial(self._grow, 0),
                "on_header_value": partial(self._grow, 1),
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
                "on_part_data": self._data,
                "on_end": partial(setattr, self, "_ended", True),
            },
        )

    def _grow(self, index: int, data: bytes, start: int, end: int) -> None:
        self._header[index] += data[start:end]

    def _header_end(self) -> None:
        field, value = self._header
        self._header = [b"", b""]
        if field.strip().lower() == b"content-disposition":
            self._disposition = value

    def _headers_finished(self) -> None:
        options = parse_options_header(self._disposition)[1]
        name = options.get(b"name", b"").decode(errors="replace")
        if name != "file" or self._in_file:
            what = "a second part 'file'" if name == "file" else f"an unexpected part {name!r}"
            raise InvalidUploadError(f"{what}: send the CSV as one part 'file'", field=name)
        self._in_file, self._disposition = True, b""
        filename = options.get(b"filename")
        self.filename = filename.decode(errors="replace")[:FILENAME_MAX_CHARS] if filename else None
        if self.filename is not None and has_control_characters(self.filename):
            raise InvalidUploadError(
                "the file name must not contain control characters", field=name
            )

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file and not self._ended:
            self._out.append(data[start:end])

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._chunks:
                self._parser.write(chunk)
                yield b"".join(self._out)
                self._out.clear()
            self._parser.finalize()
        except MultipartParseError as error:
            raise InvalidUploadError(f"malformed multipart body: {error}") from None
        if not self._ended or not self._in_file:
            problem = "ends before its last boundary" if self._in_file else "has no part 'file'"
            raise InvalidUploadError(f"the multipart body {problem}", field="file")
