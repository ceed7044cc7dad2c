"""JSON rows -> CSV (services/json_rows.py): every documented rule, read back with csv.

The CSV is checked the way the loader reads it (Python's csv module), so a quoting
mistake shows up as a wrong value, not as a different-looking string.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson
import pytest

from tally.core.errors import JsonRowsError
from tally.services.json_rows import MAX_COLUMNS, MAX_DEPTH, MAX_NUMBER_DIGITS, RULES, json_to_csv


def convert_bytes(body: bytes, chunk_size: int = 7, spill_dir: Path | None = None) -> bytes:
    chunks = [body[i : i + chunk_size] for i in range(0, len(body), chunk_size)]
    with json_to_csv(chunks, spill_dir=spill_dir) as csv_chunks:
        return b"".join(csv_chunks)


def convert(body: str | bytes, chunk_size: int = 7) -> list[list[str]]:
    raw = convert_bytes(body.encode() if isinstance(body, str) else body, chunk_size)
    return list(csv.reader(io.StringIO(raw.decode("utf-8"), newline="")))


def refused(body: str | bytes) -> JsonRowsError:
    with pytest.raises(JsonRowsError) as caught:
        convert(body)
    return caught.value


def test_array_of_objects_gives_header_and_rows() -> None:
    assert convert('[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]') == [
        ["id", "name"],
        ["1", "a"],
        ["2", "b"],
    ]


def test_rows_object_form_gives_the_same_csv_as_the_array_form() -> None:
    rows = [{"id": 1, "amount": "2.50"}, {"id": 2, "amount": "3"}]
    array = convert_bytes(orjson.dumps(rows))
    wrapped = convert_bytes(orjson.dumps({"rows": rows}))
    assert array == wrapped == b"id,amount\r\n1,2.50\r\n2,3\r\n"


def test_columns_in_first_seen_order_across_rows() -> None:
    body = '[{"b": 1, "a": 2}, {"c": 3}, {"a": 4, "d": 5, "b": 6}]'
    assert convert(body) == [
        ["b", "a", "c", "d"],
        ["1", "2", "", ""],
        ["", "", "3", ""],
        ["6", "4", "", "5"],
    ]


def test_nested_objects_flatten_with_dots_and_empty_objects_give_no_column() -> None:
    body = '[{"a": {"b": 1, "c": {"d": "x"}}, "e": {}}, {"a": {"c": {"d": "y"}}, "f": 2}]'
    assert convert(body) == [
        ["a.b", "a.c.d", "f"],
        ["1", "x", ""],
        ["", "y", "2"],
    ]


def test_arrays_are_their_compact_json_text_with_exact_numbers() -> None:
    body = '[{"tags": ["x", "y"], "mixed": [1, 0.10, {"k": null, "b": true}, [], "é\\""]}]'
    header, row = convert(body)
    assert header == ["tags", "mixed"]
    assert row == ['["x","y"]', '[1,0.10,{"k":null,"b":true},[],"é\\""]']


def test_booleans_nulls_and_missing_keys() -> None:
    body = '[{"t": true, "f": false, "n": null}, {"t": false}]'
    assert convert(body) == [["t", "f", "n"], ["true", "false", ""], ["false", "", ""]]


@pytest.mark.parametrize(
    ("number", "text"),
    [
        ("1E+2", "100"),
        ("1e2", "100"),
        ("0.000001", "0.000001"),
        ("1e-7", "0.0000001"),
        ("1.50", "1.50"),
        ("-0.0", "-0.0"),
        ("12345678901234567.89", "12345678901234567.89"),
        ("0.30000000000000004", "0.30000000000000004"),
        ("0.1", "0.1"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),
        ("-9223372036854775809", "-9223372036854775809"),
        ("2.5E-3", "0.0025"),
    ],
)
def test_numbers_keep_their_exact_digits_without_exponent(number: str, text: str) -> None:
    assert convert(f'[{{"v": {number}}}]') == [["v"], [text]]


def test_strings_are_written_as_they_are_whatever_they_hold() -> None:
    values = [
        "plain",
        "comma, inside",
        "semi;colon",
        "tab\there",
        "pipe|here",
        'quote " here',
        "line\nbreak",
        "crlf\r\nbreak",
        "  spaces  ",
        "ünïcødé ✓ 日本語 🎉",
        "",
        "1E+2",
        "007",
    ]
    rows = [{"s": value, "n": index} for index, value in enumerate(values)]
    table = convert(orjson.dumps(rows))
    assert table[0] == ["s", "n"]
    assert table[1:] == [[value, str(index)] for index, value in enumerate(values)]


def test_separators_never_make_the_reader_guess_another_delimiter() -> None:
    # Every cell holding ; | or tab is quoted, so only the comma splits a line.
    raw = convert_bytes(b'[{"a;b": "1;2", "c|d": "3|4", "e\\tf": "5\\t6"}]')
    assert raw == b'"a;b","c|d","e\tf"\r\n"1;2","3|4","5\t6"\r\n'


def test_a_single_empty_cell_is_not_a_blank_line() -> None:
    assert convert('[{"a": null}, {"a": 1}, {}]') == [["a"], [""], ["1"], [""]]


def test_chunk_boundaries_do_not_matter() -> None:
    body = orjson.dumps([{"é": "日本", "n": 1, "x": {"y": [1, 2]}}] * 20)
    one_piece = convert_bytes(body, chunk_size=len(body))
    assert convert_bytes(body, chunk_size=1) == one_piece
    assert convert_bytes(body, chunk_size=3) == one_piece


def test_a_utf8_byte_order_mark_is_ignored() -> None:
    assert convert(b'\xef\xbb\xbf[{"a": 1}]') == [["a"], ["1"]]


def test_many_rows_stream_through_the_spill_file(tmp_path: Path) -> None:
    def body() -> Iterator[bytes]:
        yield b"["
        for n in range(20_000):
            yield (b"," if n else b"") + orjson.dumps({"n": n, "amount": f"{n}.01"})
            if n == 19_999:
                yield b',{"late": true}'
        yield b"]"

    with json_to_csv(body(), spill_dir=tmp_path) as chunks:
        table = list(csv.reader(io.StringIO(b"".join(chunks).decode(), newline="")))
    assert list(tmp_path.iterdir()) == []
    assert table[0] == ["n", "amount", "late"]
    assert len(table) == 20_002
    assert table[12_346] == ["12345", "12345.01", ""]
    assert table[-1] == ["", "", "true"]


def test_rules_document_every_conversion() -> None:
    for phrase in ("first-seen order", "a.b", "1E+2", "0.000001", "JSON text", "empty cell"):
        assert phrase in RULES


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ("", None, "not valid JSON"),
        ("[{", None, "not valid JSON"),
        ('[{"a": 1}] trailing', None, "not valid JSON"),
        ("[]", None, "no rows"),
        ('{"rows": []}', "rows", "no rows"),
        ('[{"a": 1}, 5]', "[1]", "[1] is not a JSON object"),
        ('[{"a": 1}, {"a": 2}, [1]]', "[2]", "[2] is not a JSON object"),
        ('{"rows": [{"a": 1}, "x"]}', "rows[1]", "rows[1] is not a JSON object"),
        ('"text"', None, "array of objects"),
        ("42", None, "array of objects"),
        ('{"data": [{"a": 1}]}', "data", "unexpected field"),
        ('{"rows": [{"a": 1}], "extra": 1}', "extra", "unexpected field"),
        ('{"rows": {"a": 1}}', "rows", "must be an array"),
        ("{}", "rows", '"rows" array'),
        ("[{}, {}]", None, "no fields"),
        ('[{"a": 1}, {"a.b": 1, "a": {"b": 2}}]', "[1]", "'a.b'"),
        ('[{"": 1}]', "[0]", "empty key"),
        ('[{"a": {"": 1}}]', "[0]", "empty key"),
        (f'[{{"a": 1e{MAX_NUMBER_DIGITS + 5}}}]', "[0]", "digits"),
        (f'[{{"a": 1e-{MAX_NUMBER_DIGITS + 5}}}]', "[0]", "digits"),
        ('[{"a": ' + "9" * (MAX_NUMBER_DIGITS + 1) + "}]", "[0]", "digits"),
        ('[{"a": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}]", "[0]", "deeper"),
        ("[" + '{"a": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1) + "]", "[0]", "deeper"),
    ],
)
def test_bodies_that_are_not_rows_are_refused(body: str, field: str | None, words: str) -> None:
    error = refused(body)
    assert error.field == field
    assert words in error.message


def test_too_many_columns_are_refused() -> None:
    row = {f"c{n}": n for n in range(MAX_COLUMNS + 1)}
    error = refused(orjson.dumps([{"a": 1}, row]))
    assert error.field == "[1]"
    assert str(MAX_COLUMNS) in error.message
    assert convert(orjson.dumps([{f"c{n}": n for n in range(MAX_COLUMNS)}]))[0][-1] == "c999"


def test_an_error_raised_by_the_chunks_passes_through_unchanged() -> None:
    class DisconnectedError(Exception):
        pass

    def chunks() -> Iterable[bytes]:
        yield b'[{"a": 1},'
        raise DisconnectedError

    with pytest.raises(DisconnectedError), json_to_csv(chunks()):
        pass
