"""The multipart parser of uploads (api/v2/multipart.py): the `file` part, streamed."""

from __future__ import annotations

from collections.abc import Iterable

from tally.api.v2.multipart import MultipartFile


def test_multipart_streams_the_file_part_and_keeps_its_name() -> None:
    body = (
        b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="ledger.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\nid,v\r\n1,--XyZ-not-a-boundary\r\n\r\n--XyZ--\r\n"
    )
    pieces: Iterable[bytes] = [body[i : i + 3] for i in range(0, len(body), 3)]
    part = MultipartFile(pieces, b"XyZ")
    assert b"".join(part) == b"id,v\r\n1,--XyZ-not-a-boundary\r\n"
    assert part.filename == "ledger.csv"
