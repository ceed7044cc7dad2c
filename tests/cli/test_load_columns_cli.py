"""`tally admin load --columns FILE` (issue #32, point 1), on both backends: the file
declares the new source's columns as `POST /api/v2/sources` takes them (formats
included), as a list or as an object with the lines to skip; a bad declaration or a
value that does not fit is the command's JSON error, and no source is made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_load_encoding_cli import load, source_count, workspace

from tally.settings import Settings

UK_BANK = (
    "Account,12345678\n"
    "Date,Description,Amount\n"
    '01/10/2026,Rent,"(1,250.00)"\n'
    '02/10/2026,Invoice 4711,"3,445.63"\n'
    "Total,,2195.63\n"
)
__all__ = ["workspace"]  # the fixture, shared with the --encoding tests
COLUMNS: list[dict[str, Any]] = [
    {"name": "Date", "type": "date", "format": "DD/MM/YYYY"},
    {"name": "Description", "type": "text"},
    {
        "name": "Amount",
        "type": "decimal",
        "thousands_separator": ",",
        "negative": ["minus", "parentheses"],
    },
]


def files(tmp_path: Path, declared: Any, content: str = UK_BANK) -> tuple[Path, Path]:
    csv, columns = tmp_path / "bank.csv", tmp_path / "columns.json"
    csv.write_text(content)
    columns.write_text(json.dumps(declared))
    return csv, columns


def test_load_declares_the_columns_formats_and_lines_to_skip(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    declared = {"columns": COLUMNS, "skip_leading_lines": 1, "skip_trailing_lines": 1}
    csv, columns = files(tmp_path, declared)
    code, loaded = load(settings, workspace, csv, "--columns", str(columns))
    assert code == 0, loaded
    assert loaded["rows"] == 2
    assert "warnings" not in loaded


def test_a_list_of_columns_is_taken_too(settings: Settings, workspace: int, tmp_path: Path) -> None:
    content = "Date,Amount\n01/10/2026,(12.50)\n"
    csv, columns = files(tmp_path, [COLUMNS[0], COLUMNS[2]], content)
    code, loaded = load(settings, workspace, csv, "--columns", str(columns))
    assert (code, loaded["rows"]) == (0, 1), loaded


def test_a_bad_declaration_names_the_field_and_makes_no_source(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    bad = [{**COLUMNS[0], "format": "%d/%m/%Y"}, *COLUMNS[1:]]
    csv, columns = files(tmp_path, {"columns": bad, "skip_leading_lines": 1})
    code, refused = load(settings, workspace, csv, "--columns", str(columns))
    assert code == 1, refused
    assert refused["kind"] == "InvalidBodyError"
    assert refused["error"].startswith("columns[0].format: "), refused
    assert source_count(settings) == 0


def test_a_value_that_does_not_fit_names_line_column_and_value(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    csv, columns = files(tmp_path, {"columns": COLUMNS, "skip_leading_lines": 1})
    code, refused = load(settings, workspace, csv, "--columns", str(columns))
    assert code == 1, refused
    assert (refused["kind"], refused["line"], refused["column"]) == ("LoadError", 5, "Date")
    assert "'Total'" in refused["error"]
    assert source_count(settings) == 0


def test_inferred_columns_say_which_date_formats_fit(
    settings: Settings, workspace: int, tmp_path: Path
) -> None:
    csv = tmp_path / "us.csv"
    csv.write_text("day,amount\n10/01/2026,1.00\n")
    code, loaded = load(settings, workspace, csv)
    assert code == 0, loaded
    [warning] = loaded["warnings"]
    assert "DD/MM/YYYY or MM/DD/YYYY" in warning
