"""JSON rows -> CSV for uploads, in constant memory, by the documented RULES below.

No float anywhere: ijson hands numbers over as int or Decimal and they are written with
their exact digits. Two passes: rows are spilled to a temporary file while the columns
are collected, then the CSV is written from the spill. No I/O besides that spill file.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from itertools import chain
from pathlib import Path
from typing import IO, Any

import ijson  # type: ignore[import-untyped]
import orjson

from tally.core.errors import JsonRowsError

MAX_COLUMNS = 1000
MAX_DEPTH = 32
MAX_NUMBER_DIGITS = 1000
OUTPUT_CHUNK_BYTES = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"

RULES = f"""\
A JSON body is an array of objects, or an object `{{"rows": [...]}}` holding one; it is
converted to CSV (UTF-8, comma separated) before it is queued:

- Columns appear in first-seen order across all rows: a key first met in row 5 comes
  after every key of rows 0 to 4. Within a row, keys keep their order.
- Nested objects are flattened with dots: `{{"a": {{"b": 1}}}}` gives the column `a.b`.
  An empty object gives no column.
- Arrays are kept as their compact JSON text: `[1, "x"]` gives `[1,"x"]`.
- `true` and `false` give `true` and `false`; `null` and a missing key give an empty cell.
- Numbers keep their exact digits, written without an exponent: `1E+2` gives `100`,
  `0.000001` stays `0.000001`, `1.50` stays `1.50`. No binary float is involved.
- Strings are written as they are.

Refused with 422: a body that is not JSON; an empty array ("no rows"); a row that is not
an object (the error names its index, e.g. `[3]` or `rows[3]`); an empty key; two keys of
one row that flatten to the same column; more than {MAX_COLUMNS} columns; objects or arrays
nested deeper than {MAX_DEPTH} levels; a number with more than {MAX_NUMBER_DIGITS} digits.
"""

_NEEDS_QUOTES = re.compile(r'[,;\t|"\r\n]')  # any separator the CSV reader might sniff
_INTEGER_LIMIT = 10**MAX_NUMBER_DIGITS


class _ChunkReader:
    """A file-like `read` over an iterable of byte chunks (what ijson reads from)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""
        self._started = False

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return b""
            if not self._started and chunk:
                self._started = True
                chunk = chunk.removeprefix(UTF8_BOM)
            self._buffer = chunk
        if 0 < size < len(self._buffer):
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        else:
            out, self._buffer = self._buffer, b""
        return out


def _envelope(events: Iterator[Any]) -> Iterator[Any]:
    """Check the object form: exactly one key, `rows`, holding an array."""
    has_rows = False
    for event in events:
        prefix, kind, value = event
        if prefix == "" and kind == "map_key":
            if value != "rows" or has_rows:
                raise JsonRowsError(
                    f'unexpected field {value!r}: the object form is {{"rows": [...]}}',
                    field=str(value),
                )
            has_rows = True
        elif prefix == "rows" and kind not in ("start_array", "end_array"):
            raise JsonRowsError("rows must be an array of objects", field="rows")
        yield event
    if not has_rows:
        raise JsonRowsError('the object form needs a "rows" array', field="rows")


def _rows(chunks: Iterable[bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each row, streamed; where is `[i]` or `rows[i]`."""
    events = ijson.parse(_ChunkReader(chunks), use_float=False)
    first = next(events, None)  # (an empty body raises: premature EOF)
    stream: Iterator[Any] = chain([first], events)
    if first and first[1] == "start_array":
        where, prefix = "", "item"
    elif first and first[1] == "start_map":
        where, prefix, stream = "rows", "rows.item", _envelope(stream)
    else:
        raise JsonRowsError('the body must be an array of objects or {"rows": [...]}')
    count = 0
    for count, row in enumerate(ijson.items(stream, prefix), 1):
        if not isinstance(row, dict):
            raise JsonRowsError(
                f"{where}[{count - 1}] is not a JSON object", field=f"{where}[{count - 1}]"
            )
        yield f"{where}[{count - 1}]", row
    if count == 0:
        raise JsonRowsError("no rows: the body holds an empty array", field=where or None)


def _number_text(value: int | Decimal, where: str) -> str:
    if isinstance(value, int):
        if abs(value) >= _INTEGER_LIMIT:
            raise JsonRowsError(f"a number has more than {MAX_NUMBER_DIGITS} digits", field=where)
        return str(value)
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)  # JSON has no NaN or Infinity
    if max(value.adjusted(), 0) + max(-exponent, 0) > MAX_NUMBER_DIGITS:
        raise JsonRowsError(f"a number has more than {MAX_NUMBER_DIGITS} digits", field=where)
    return format(value, "f")


def _json_text(value: Any, where: str, depth: int) -> str:
    """Compact JSON text of a value inside an array, numbers exact."""
    if depth > MAX_DEPTH:
        raise JsonRowsError(f"nested deeper than {MAX_DEPTH} levels", field=where)
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(
                orjson.dumps(k).decode() + ":" + _json_text(v, where, depth + 1)
                for k, v in value.items()
            )
            + "}"
        )
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v, where, depth + 1) for v in value) + "]"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    return _scalar_text(value, where) if value is not None else "null"


def _scalar_text(value: Any, where: str) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | Decimal):
        return _number_text(value, where)
    raise TypeError(f"unexpected JSON value {type(value).__name__}")  # never a float


def _cell_text(value: Any, where: str, depth: int) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _json_text(value, where, depth + 1)
    return _scalar_text(value, where)


def _cells(
    row: dict[str, Any],
    where: str,
    prefix: str = "",
    depth: int = 1,
) -> Iterator[tuple[str, str]]:
    """(column, cell text) pairs of one row, nested objects flattened with dots."""
    if depth > MAX_DEPTH:
        raise JsonRowsError(f"nested deeper than {MAX_DEPTH} levels", field=where)
    for key, value in row.items():
        if key == "":
            raise JsonRowsError(f"{where} has an empty key", field=where)
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            yield from _cells(value, where, name, depth + 1)
        else:
            yield name, _cell_text(value, where, depth)


def _spill_rows(chunks: Iterable[bytes], spill: IO[bytes]) -> list[str]:
    """Pass 1: each row as [index, text, index, text, ...] on one line; the columns."""
    columns: dict[str, int] = {}
    for where, row in _rows(chunks):
        line: list[int | str] = []
        seen: set[str] = set()
        for name, text in _cells(row, where):
            if name in seen:
                raise JsonRowsError(
                    f"{where}: two keys give the column {name!r} once nested objects are flattened",
                    field=where,
                )
            seen.add(name)
            index = columns.setdefault(name, len(columns))
            if index >= MAX_COLUMNS:
                raise JsonRowsError(f"more than {MAX_COLUMNS} columns", field=where)
            line += (index, text)
        spill.write(orjson.dumps(line) + b"\n")
    if not columns:
        raise JsonRowsError("the rows have no fields")
    return list(columns)


def _csv_line(cells: Iterable[str]) -> str:
    line = ",".join(
        '"' + c.replace('"', '""') + '"' if _NEEDS_QUOTES.search(c) else c for c in cells
    )
    return (line or '""') + "\r\n"  # a blank line would be read as no record at all


def _csv_chunks(columns: list[str], spill: IO[bytes]) -> Iterator[bytes]:
    """Pass 2: the header, then every spilled row in the columns' order."""
    parts = [_csv_line(columns)]
    size = 0
    for raw in spill:
        flat = orjson.loads(raw)
        cells = [""] * len(columns)
        for position in range(0, len(flat), 2):
            cells[flat[position]] = flat[position + 1]
        line = _csv_line(cells)
        parts.append(line)
        size += len(line)
        if size >= OUTPUT_CHUNK_BYTES:
            yield "".join(parts).encode()
            parts, size = [], 0
    if parts:
        yield "".join(parts).encode()


def _parse_problem(error: Exception) -> JsonRowsError:
    text = error.args[0] if error.args else str(error)
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    first = str(text).strip().splitlines()[0] if str(text).strip() else "unexpected end"
    return JsonRowsError(f"the body is not valid JSON: {first}")


@contextmanager
def json_to_csv(
    chunks: Iterable[bytes],
    *,
    spill_dir: Path | None = None,
) -> Iterator[Iterator[bytes]]:
    """The CSV text of a JSON rows body, as byte chunks, valid inside the `with` block.

    Raises JsonRowsError on entry (pass 1 reads the whole body) when the body breaks a rule.
    Errors raised by `chunks` itself (a size limit, a disconnect) pass through unchanged.
    """
    with tempfile.TemporaryFile(dir=spill_dir, suffix=".spill") as spill:
        try:
            columns = _spill_rows(chunks, spill)
        except ijson.JSONError as error:
            raise _parse_problem(error) from None
        spill.seek(0)
        yield _csv_chunks(columns, spill)
