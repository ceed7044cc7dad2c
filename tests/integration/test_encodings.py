"""A file's encoding on both backends (issue #14, point 3): UTF-8 is strict by default
and a file that is not fails naming the line and the byte offset; a source may declare
its encoding (latin-1, cp1252, utf-16, ...), kept with it and used by every load.

Nothing is guessed: a file whose bytes are not valid in the source's encoding is never
read in another one, so text that was valid is never changed.
"""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from support.factories import Tenant, count_resources, read_data, write_file
from tally.core.errors import DefinitionRejectedError, LoadError
from tally.runtime import Runtime
from tally.services.loader.load import LoadResult
from tally.storage import resources

# The file: row 1 is valid UTF-8 ("café"), row 2 holds a Latin-1 "é" (0xE9).
MIXED = b"id,name\n1,caf\xc3\xa9\n2,caf\xe9\n"
MIXED_BAD_OFFSET = MIXED.index(b"\xe9\n")  # 21: bytes 0..20 are valid UTF-8
MEBIBYTE = 1 << 20


def load(
    runtime: Runtime,
    tenant: Tenant,
    content: bytes,
    *,
    encoding: str | None = None,
    name: str = "src",
) -> LoadResult:
    path = write_file(content)
    try:
        options: dict[str, Any] = {} if encoding is None else {"encoding": encoding}
        return runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id, name=name, path=path, **options
        )
    finally:
        path.unlink()


def load_fails(
    runtime: Runtime, tenant: Tenant, content: bytes, *, encoding: str | None = None
) -> LoadError:
    """The error of a new source made from a bad file, once it is known none was made."""
    before = count_resources(runtime, tenant)
    with pytest.raises(LoadError) as caught:
        load(runtime, tenant, content, encoding=encoding)
    assert count_resources(runtime, tenant) == before
    return caught.value


def rows_of(runtime: Runtime, tenant: Tenant, resource_id: int) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, resource_id, page_size=10_000)


def append(runtime: Runtime, resource_id: int, content: bytes) -> LoadResult:
    path = write_file(content)
    try:
        return runtime.catalogue.append_file(resource_id, path)
    finally:
        path.unlink()


def assert_names_place(error: LoadError, *, line: int, offset: int, encoding: str) -> None:
    assert error.line == line, error
    assert f"byte offset {offset}" in error.reason, error
    assert encoding.lower() in error.reason.lower(), error
    assert str(error).startswith(f"line {line}:")


# --- strict UTF-8 by default ----------------------------------------------------------------


def test_one_latin1_byte_in_a_utf8_file_fails_naming_line_and_offset(
    runtime: Runtime, tenant: Tenant
) -> None:
    error = load_fails(runtime, tenant, MIXED)
    assert MIXED_BAD_OFFSET == 21
    assert_names_place(error, line=3, offset=21, encoding="UTF-8")
    assert "0xe9" in error.reason.lower()


def test_gzipped_file_names_the_offset_in_its_decompressed_bytes(
    runtime: Runtime, tenant: Tenant
) -> None:
    error = load_fails(runtime, tenant, gzip.compress(MIXED))
    assert_names_place(error, line=3, offset=21, encoding="UTF-8")


def thousands_of_utf8_rows_and_one_latin1_byte(bad_row: int) -> tuple[bytes, int, int]:
    """4,999 valid UTF-8 rows with accents and one row with a Latin-1 byte: the file,
    the bad byte's line and offset."""
    lines = [b"id,name,amount"]
    bad_offset = 0
    for i in range(1, 5001):
        if i == bad_row:
            bad_offset = sum(len(line) + 1 for line in lines) + len(f"{i},Zürich M".encode())
            lines.append(f"{i},Zürich ".encode() + b"M\xfcller" + f",{i}.50".encode())
        else:
            lines.append(f"{i},Zürich café {i},{i}.50".encode())
    content = b"\n".join(lines) + b"\n"
    assert content[bad_offset] == 0xFC
    return content, bad_row + 1, bad_offset


@pytest.mark.parametrize("bad_row", [1, 2500, 5000])
def test_thousands_of_valid_rows_and_one_bad_byte_fail(
    runtime: Runtime, tenant: Tenant, bad_row: int
) -> None:
    content, line, offset = thousands_of_utf8_rows_and_one_latin1_byte(bad_row)
    error = load_fails(runtime, tenant, content)
    assert_names_place(error, line=line, offset=offset, encoding="UTF-8")


def test_a_bad_byte_past_the_first_mebibyte_is_placed_exactly(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The file is read in pieces: a character split between two pieces is valid, and a
    bad byte in a later piece is placed by the whole file's bytes and lines."""
    row = "7,€€€€€€€€€€€€€€€€€€€€ ok\n".encode()  # mostly 3-byte characters
    rows = (MEBIBYTE // len(row)) + 1

    def made(pad: int) -> bytes:
        return b"id,memo" + b"x" * pad + b"\n" + row * rows

    # the first mebibyte ends inside a "€" (E2 82 AC)
    content = next(c for c in map(made, range(len(row))) if c[MEBIBYTE - 1] == 0xE2)
    assert content[MEBIBYTE - 1 : MEBIBYTE + 2] == "€".encode()
    good = load(runtime, tenant, content, name="good")
    assert good.rows == rows
    start = len(content) - 6 * len(row)  # the sixth row from the end: line rows - 4
    broken = content[:start] + b"7,\x80" + content[start + 3 :]
    error = load_fails(runtime, tenant, broken)
    assert_names_place(error, line=rows - 4, offset=start + 2, encoding="UTF-8")


def test_line_numbers_count_crlf_lone_cr_and_quoted_newlines(
    runtime: Runtime, tenant: Tenant
) -> None:
    content = b'id,memo\r\n1,"two\r\nlines"\r\n2,x\r3,\xff\n'
    error = load_fails(runtime, tenant, content)
    assert_names_place(error, line=5, offset=content.index(b"\xff"), encoding="UTF-8")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("\ufeffid,name\n1,café\n".encode(), [{"id": 1, "name": "café"}]),
        ("id,name\n1,café\n".encode(), [{"id": 1, "name": "café"}]),
        (gzip.compress("\ufeffid,name\n1,日本\n".encode()), [{"id": 1, "name": "日本"}]),
    ],
    ids=["bom", "no bom", "gzip bom"],
)
def test_utf8_with_or_without_bom_loads_exactly(
    runtime: Runtime, tenant: Tenant, content: bytes, expected: list[dict[str, Any]]
) -> None:
    result = load(runtime, tenant, content)
    assert [c.name for c in result.resource.columns] == ["id", "name"]
    assert rows_of(runtime, tenant, result.resource.id) == expected


def test_bom_counts_in_the_byte_offset(runtime: Runtime, tenant: Tenant) -> None:
    content = b"\xef\xbb\xbf" + MIXED
    error = load_fails(runtime, tenant, content)
    assert_names_place(error, line=3, offset=24, encoding="UTF-8")


def test_utf16_file_without_a_declared_encoding_says_so(runtime: Runtime, tenant: Tenant) -> None:
    error = load_fails(runtime, tenant, "a,b\n1,2\n".encode("utf-16"))
    assert error.line == 1
    assert "byte offset 0" in error.reason
    assert "UTF-16" in error.reason


# --- a declared encoding ----------------------------------------------------------------------

LATIN1_TEXT = "name;café\nJosé;Zürich\nRenée;1,5\n"
LATIN1_ROWS = [{"name": "José", "café": "Zürich"}, {"name": "Renée", "café": "1,5"}]
# Characters where cp1252 and Latin-1 differ (0x80-0x9F): euro, curly quotes, en dash,
# ellipsis, OE ligature.
CP1252_TEXT = "id,memo\n1,€ 5 \u2013 \u2018quoted\u2019\n2,Œuvre…\n"
CP1252_ROWS = [{"id": 1, "memo": "€ 5 \u2013 \u2018quoted\u2019"}, {"id": 2, "memo": "Œuvre…"}]
WIDE_TEXT = "id,name,amount\n1,Łódź,1.50\n2,日本 😀,-2\n"
WIDE_ROWS: list[dict[str, Any]] = [
    {"id": 1, "name": "Łódź", "amount": Decimal("1.50")},
    {"id": 2, "name": "日本 😀", "amount": Decimal("-2.00")},
]

DECLARED = {
    "latin-1": (LATIN1_TEXT.encode("latin-1"), "latin-1", ["name", "café"], LATIN1_ROWS),
    "latin-1 gzip": (
        gzip.compress(LATIN1_TEXT.encode("latin-1")),
        "latin-1",
        ["name", "café"],
        LATIN1_ROWS,
    ),
    "iso-8859-1 spelling": (
        LATIN1_TEXT.encode("latin-1"),
        "ISO-8859-1",
        ["name", "café"],
        LATIN1_ROWS,
    ),
    "cp1252": (CP1252_TEXT.encode("cp1252"), "cp1252", ["id", "memo"], CP1252_ROWS),
    "windows-1252 spelling": (
        CP1252_TEXT.encode("cp1252"),
        "windows-1252",
        ["id", "memo"],
        CP1252_ROWS,
    ),
    "utf-16 bom": (WIDE_TEXT.encode("utf-16"), "utf-16", ["id", "name", "amount"], WIDE_ROWS),
    "utf-16-be bom": (
        b"\xfe\xff" + WIDE_TEXT.encode("utf-16-be"),
        "utf-16",
        ["id", "name", "amount"],
        WIDE_ROWS,
    ),
    "utf-16-le no bom": (
        WIDE_TEXT.encode("utf-16-le"),
        "utf-16-le",
        ["id", "name", "amount"],
        WIDE_ROWS,
    ),
    "utf-8 declared, bom": (
        b"\xef\xbb\xbf" + WIDE_TEXT.encode(),
        "utf-8",
        ["id", "name", "amount"],
        WIDE_ROWS,
    ),
}


@pytest.mark.parametrize("case", DECLARED)
def test_declared_encoding_loads_exactly(runtime: Runtime, tenant: Tenant, case: str) -> None:
    content, encoding, names, expected = DECLARED[case]
    result = load(runtime, tenant, content, encoding=encoding)
    assert [c.name for c in result.resource.columns] == names
    assert rows_of(runtime, tenant, result.resource.id) == expected


def test_declared_encoding_is_kept_and_used_by_later_files(
    runtime: Runtime, tenant: Tenant
) -> None:
    created = load(runtime, tenant, CP1252_TEXT.encode("cp1252"), encoding="windows-1252")
    with runtime.engine.connect() as conn:
        stored = resources.get_resource(conn, created.resource.id)
    assert stored.encoding == "cp1252"  # the codec's own name
    append(runtime, created.resource.id, "id,memo\n3,„Zitat“ €\n".encode("cp1252"))
    rows = rows_of(runtime, tenant, created.resource.id)
    assert rows[2] == {"id": 3, "memo": "„Zitat“ €"}


def test_a_utf8_source_refuses_a_later_latin1_file_and_keeps_its_rows(
    runtime: Runtime, tenant: Tenant
) -> None:
    created = load(runtime, tenant, "name;city\nJosé;Zürich\n".encode())
    with runtime.engine.connect() as conn:
        before = resources.get_resource(conn, created.resource.id)
    path = write_file("name;city\nRenée;Köln\n".encode("latin-1"))
    try:
        with pytest.raises(LoadError) as caught:
            runtime.catalogue.append_file(created.resource.id, path)
    finally:
        path.unlink()
    assert_names_place(caught.value, line=2, offset=len(b"name;city\nRen"), encoding="UTF-8")
    with runtime.engine.connect() as conn:
        after = resources.get_resource(conn, created.resource.id)
    assert (after.data_version, after.row_count) == (before.data_version, before.row_count)
    assert rows_of(runtime, tenant, created.resource.id) == [{"name": "José", "city": "Zürich"}]


@pytest.mark.parametrize(
    ("content", "encoding", "line", "offset"),
    [
        # 0x81 is not a cp1252 character
        (b"id,memo\n1,ok\n2,\x81\n", "cp1252", 3, 15),
        # a UTF-16 file cut in the middle of a character
        ("id,memo\n1,ok\n".encode("utf-16-le") + b"2", "utf-16-le", 3, 26),
        # a lone high surrogate
        ("id,memo\n".encode("utf-16-le") + b"1\x00,\x00\x00\xd8\n\x00", "utf-16-le", 2, 20),
    ],
    ids=["cp1252 undefined byte", "utf-16 truncated", "utf-16 lone surrogate"],
)
def test_bytes_invalid_in_the_declared_encoding_fail_naming_line_and_offset(
    runtime: Runtime, tenant: Tenant, content: bytes, encoding: str, line: int, offset: int
) -> None:
    error = load_fails(runtime, tenant, content, encoding=encoding)
    assert_names_place(error, line=line, offset=offset, encoding=encoding)


def test_nul_character_in_a_declared_utf16_file_is_refused(
    runtime: Runtime, tenant: Tenant
) -> None:
    error = load_fails(runtime, tenant, "a,b\n1,x\x00y\n".encode("utf-16"), encoding="utf-16")
    assert (error.line, error.column) == (2, "b")
    assert "NUL" in error.reason


@pytest.mark.parametrize("encoding", ["klingon", "rot13", "base64", ""])
def test_unknown_encoding_is_refused_naming_the_field(
    runtime: Runtime, tenant: Tenant, encoding: str
) -> None:
    with pytest.raises(DefinitionRejectedError) as caught:
        load(runtime, tenant, b"a,b\n1,2\n", encoding=encoding)
    assert [p.field for p in caught.value.problems] == ["encoding"]
    assert count_resources(runtime, tenant) == 0


def test_large_latin1_file_loads_exactly(runtime: Runtime, tenant: Tenant, tmp_path: Path) -> None:
    """Past one read piece and one batch, on the paths big files take."""
    names = ["Müller", "Gärtner", "Zoë", "Ångström", "façade"]
    lines = ["id;name;amount"] + [
        f"{i};{names[i % 5]} {i};{i},{i % 100:02d}" for i in range(60_000)
    ]
    content = ("\n".join(lines) + "\n").encode("latin-1")
    assert len(content) > MEBIBYTE
    result = load(runtime, tenant, content, encoding="latin-1")
    assert result.rows == 60_000
    rows = rows_of(runtime, tenant, result.resource.id)
    assert rows[0] == {"id": 0, "name": "Müller 0", "amount": "0,00"}
    assert rows[9_999]["name"] == "façade 9999"
