"""The file limits (services/loader/limits.py): checked while the bytes stream past."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from support.hostile import gzip_bomb, gzipped, ledger_csv
from tally.core.errors import LoadError
from tally.core.limits import FileLimits
from tally.services.loader.limits import (
    LimitedGzip,
    LineMeter,
    check_width,
    long_field_index,
)

LIMITS = FileLimits(
    max_file_bytes=1 << 30,
    max_compression_ratio=200,
    max_columns=500,
    max_header_bytes=100,
    max_line_bytes=1000,
    max_cell_bytes=50,
)


def read_all(content: bytes, limits: FileLimits = LIMITS) -> int:
    with LimitedGzip(io.BytesIO(content), limits) as stream:
        return sum(len(chunk) for chunk in iter(lambda: stream.read(1 << 20), b""))


def test_a_bomb_is_refused_within_its_first_megabytes() -> None:
    with pytest.raises(LoadError, match="TALLY_MAX_COMPRESSION_RATIO") as refused:
        read_all(gzip_bomb(1 << 30))
    assert "200 times" in refused.value.message


def test_the_size_limit_counts_decompressed_bytes() -> None:
    content = ledger_csv(5000)
    small = FileLimits(**{**LIMITS.__dict__, "max_file_bytes": len(content) - 1})
    with pytest.raises(LoadError, match=f"{len(content) - 1} bytes once decompressed"):
        read_all(gzipped(content), small)
    assert read_all(gzipped(content)) == len(content)


def test_a_small_file_may_expand_a_lot() -> None:
    content = b"a,b\n" + b"1,2\n" * 100_000  # 400 KB from ~1 KB: under the ratio's floor
    assert read_all(gzipped(content)) == len(content)


def meter(content: bytes, chunk: int) -> None:
    lines = LineMeter(LIMITS)
    for start in range(0, len(content), chunk):
        lines.feed(content[start : start + chunk])


@pytest.mark.parametrize("chunk", [7, 100, 1000, 5000])  # 5000: a chunk grown in UTF-8
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_lines_are_measured_across_chunks(chunk: int, newline: bytes) -> None:
    fine = newline.join([b"h" * 99, b"x" * 999, b"y" * 10, b""])
    meter(fine, chunk)
    with pytest.raises(LoadError, match="TALLY_MAX_HEADER_BYTES") as header:
        meter(newline.join([b"h" * 101, b"x"]), chunk)
    assert header.value.line == 1
    with pytest.raises(LoadError, match="TALLY_MAX_LINE_BYTES") as line:
        meter(newline.join([b"h", b"x", b"y" * 1001, b"z"]), chunk)
    assert line.value.line == 3


def test_too_many_columns_names_the_first_over_the_limit() -> None:
    check_width([f"c{i}" for i in range(500)], LIMITS)
    with pytest.raises(LoadError, match="501 columns, more than the limit of 500") as wide:
        check_width([f"c{i}" for i in range(501)], LIMITS)
    assert (wide.value.line, wide.value.column) == (1, "c500")


def pieces(text: str, size: int) -> Iterator[str]:
    return (text[i : i + size] for i in range(0, len(text), size))


@pytest.mark.parametrize("size", [1, 3, 64, 10_000])
def test_the_long_field_is_found_by_its_position(size: int) -> None:
    long = "z" * 51
    quoted = '"' + 'a""b\n' * 20 + '"'  # 100 characters inside the quotes
    cases = {
        f"1,{long},3\n4,5,6\n": 1,
        f'"{long}",2\n': 0,
        f'1,"x,y",{quoted}\n': 2,
        f"1,2,{long}": 2,
        "1,2,3\n" + long: None,
        f'1,"{"q" * 50}",3\n': None,
    }
    for text, index in cases.items():
        assert long_field_index(pieces(text, size), ",", 50) == index, text
