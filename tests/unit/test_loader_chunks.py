"""Pass 1 over a plain file's own lines, a chunk at a time (services/loader/chunks.py):
it settles exactly what the CSV reader's batches settle, and fails at the same line."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from support.factories import CHUNKED_EARLY, CHUNKED_HEADER, chunked_csv
from tally.core.errors import LoadError
from tally.core.formats import FileLayout
from tally.services.loader.chunks import ChunkRecords, Counted, read_chunks
from tally.services.loader.inference import BatchConfirmation, ColumnGuess, batch_confirmation
from tally.services.loader.load import FirstPass, _infer_from
from tally.services.loader.reader import RAW_CHUNK_BYTES, Batch, detect_format, read_csv


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    return tmp_path / "file.csv"


def both_ways(path: Path) -> tuple[FirstPass, FirstPass, int]:
    """(pass 1 by chunks, pass 1 by rows, chunks counted without parsing)."""
    file_format = detect_format(path)
    with read_chunks(path, file_format) as chunked:
        assert chunked is not None
        chunked.__class__ = Counting
        by_chunks = _infer_from(path, file_format, chunked.header, chunked, None)
        counted = cast("Counting", chunked).counted
    with read_csv(path, file_format) as (header, records):
        by_rows = _infer_from(path, file_format, header, records, None)
    return by_chunks, by_rows, counted


class Counting(ChunkRecords):
    """ChunkRecords that count the chunks they matched."""

    counted = 0

    def __iter__(self) -> Iterator[Counted | Batch]:
        for item in super().__iter__():
            self.counted += isinstance(item, Counted)
            yield item


LATE = {
    "plain": [],
    "a decimal with more digits": ["7,2024-01-01,1.123,x"],
    "an integer too long to measure cheaply": ["123456789012345678,2024-01-01,1.00,x"],
    "a timestamp among dates": ["7,2024-01-01T10:00:00,1.00,x"],
    "text among dates": ["7,not a day,1.00,x"],
    "an empty value": ["7,,1.00,x"],
    "a blank line": [""],
    "a quote inside an unquoted value": ['7,2024-01-01,1.00,the "best" one'],
    "an escaped quote": ['7,2024-01-01,1.00,"say ""hi"""'],
    "a quoted line break": ['7,2024-01-01,1.00,"two\nlines"'],
    "a carriage return in a quoted value": ['7,2024-01-01,1.00,"a\rb"'],
    "a quoted number": ['7,2024-01-01,"1.00",x'],
    "a copy end marker in a quoted value": ['7,2024-01-01,1.00,"\\."'],
}


@pytest.mark.parametrize("late", LATE.values(), ids=LATE.keys())
def test_chunks_settle_what_rows_settle(csv_file: Path, late: list[str]) -> None:
    csv_file.write_text(chunked_csv(*late))
    by_chunks, by_rows, counted = both_ways(csv_file)
    assert by_chunks == by_rows
    assert counted >= 1  # a chunk at least was matched, not parsed


def test_a_quoted_line_break_across_two_chunks(csv_file: Path) -> None:
    """A chunk cut inside a quoted value: the rest of the file is read record by record."""
    text = chunked_csv()
    start = len(CHUNKED_HEADER) + 1
    cut = start + text[start : start + RAW_CHUNK_BYTES].rfind("\n") + 1  # the first chunk's end
    last = text.rfind("\n", 0, cut - 1) + 1  # where the first chunk's last line starts
    opened = ('7,2024-01-01,1.00,"' + "x" * cut)[: cut - 1 - last]  # as long as that line
    csv_file.write_text(text[:last] + opened + '\nacross the cut"' + text[text.index("\n", cut) :])
    by_chunks, by_rows, _counted = both_ways(csv_file)
    assert by_chunks == by_rows
    assert by_chunks.rows == 2 * CHUNKED_EARLY - 1


BAD = {
    "a short row": ("7,2024-01-01,1.00", "expected 4 fields, found 3"),
    "a long row": ("7,2024-01-01,1.00,x,y", "expected 4 fields, found 5"),
    "a stray quote": ('7,2024-01-01,1.00,"a"b', "malformed CSV"),
    "an unfinished quote": ('7,2024-01-01,1.00,"never closed', "malformed CSV"),
}


@pytest.mark.parametrize(("bad", "reason"), BAD.values(), ids=BAD.keys())
def test_chunks_fail_where_rows_fail(csv_file: Path, bad: str, reason: str) -> None:
    csv_file.write_text(chunked_csv(bad))
    file_format = detect_format(csv_file)
    with read_csv(csv_file, file_format) as (header, records), pytest.raises(LoadError) as by_rows:
        _infer_from(csv_file, file_format, header, records, None)
    with read_chunks(csv_file, file_format) as chunked:
        assert chunked is not None
        with pytest.raises(LoadError) as by_chunks:
            _infer_from(csv_file, file_format, chunked.header, chunked, None)
    assert reason in str(by_rows.value)
    assert by_chunks.value.line == by_rows.value.line == CHUNKED_EARLY + 2
    assert str(by_chunks.value) == str(by_rows.value)


NOT_CHUNKED = {
    "one column": ("n\n1\n2\n", {}),
    "a quoted header": ('"id",memo\n1,a\n', {}),
    "carriage returns and line feeds": ("id,memo\r\n1,a\r\n", {}),
    "a blank line before the header": ("\nid,memo\n1,a\n", {}),
    "a header without a line end": ("id,memo", {}),
    "lines skipped": ("id,memo\n1,a\n", {"layout": FileLayout(skip_leading_lines=1)}),
    "another encoding": ("id,memo\n1,a\n", {"encoding": "latin-1"}),
}


@pytest.mark.parametrize(("content", "changes"), NOT_CHUNKED.values(), ids=NOT_CHUNKED.keys())
def test_files_read_by_rows(csv_file: Path, content: str, changes: dict[str, object]) -> None:
    csv_file.write_text(content)
    found = detect_format(csv_file)
    file_format = dataclasses.replace(found, **changes)
    with read_chunks(csv_file, file_format) as chunked:
        assert chunked is None


def confirmation_of(*columns: list[str], delimiter: str = ",") -> BatchConfirmation:
    guesses = []
    for values in columns:
        guess = ColumnGuess()
        guess.observe(values)
        guesses.append(guess)
    confirmation = batch_confirmation(guesses, delimiter)
    assert confirmation is not None
    return confirmation


@pytest.mark.parametrize(
    ("lines", "matched"),
    [
        (b"12,a\n3,b c\n", True),
        (b'12,"a, b"\n', True),  # a quoted delimiter
        (b"12,a", True),  # the file's last line, without a line end
        (b"12,a\n\n3,b\n", False),  # a blank line
        (b"12,a\r\n", False),  # a carriage return
        (b'12,a "b"\n', False),  # a quote inside an unquoted value
        (b'12,"a ""b"""\n', False),  # an escaped quote
        (b'12,""\n', False),  # a quoted empty value
        (b'"12",a\n', False),  # a quoted number
        (b"12,a,b\n", False),  # a third value
        (b"123,a\n", False),  # a longer number than measured
        (b"1.5,a\n", False),  # a fraction in an integer column
        (b",a\n", False),  # an empty value where none was seen
    ],
)
def test_lines_confirmed_as_written(lines: bytes, matched: bool) -> None:
    confirmation = confirmation_of(["10", "99"], ["x", "y"])
    assert confirmation.matches(lines) is matched


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_lines_confirmed_with_each_delimiter(delimiter: str) -> None:
    confirmation = confirmation_of(["10", "99"], ["x", "y"], delimiter=delimiter)
    line = f'12{delimiter}a\n12{delimiter}"b{delimiter}c"\n'.encode()
    assert confirmation.matches(line)
    assert not confirmation.matches(f"12{delimiter}a{delimiter}b\n".encode())
