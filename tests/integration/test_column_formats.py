"""Formats per column on both backends (issue #32, point 1): files shaped like real bank
exports (German, French, UK and US conventions, debit/credit marks, a preamble of
account lines and a totals line) load exactly into a source that declares its
columns' formats; a value that does not fit fails the file naming line, column and
value; a text column of dates in a format tally does not guess is named in the file's
warnings with the formats that fit.

Each file goes the way a delivered file goes (queued, claimed, loaded by a worker: on
SQLite staged outside the write lock, on PostgreSQL COPYed), and the same declaration
through `tally admin load --columns` (SourceCatalogue.create_source_from_file).
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest

from support.factories import Tenant, read_data, run_pipeline, write_file
from tally.core.bodies import parsed
from tally.core.errors import InvalidBodyError, LoadError
from tally.core.files import FileRecord
from tally.core.source_bodies import DeclaredLayout
from tally.runtime import Runtime
from tally.services.loader import load as load_module
from tally.services.loader import staged as staged_module
from tally.services.sources import SourceDefinition
from tally.storage import files
from tally.storage.bulk_load.postgresql import PostgresBulkLoad
from tally.storage.resources import Resource

_names = itertools.count()
GERMAN_COLUMNS: list[dict[str, Any]] = [
    {"name": "Buchungstag", "type": "date", "format": "DD.MM.YYYY"},
    {"name": "Verwendungszweck", "type": "text"},
    {
        "name": "Betrag",
        "type": "decimal",
        "decimal_separator": ",",
        "thousands_separator": ".",
    },
]
# A German bank's export: account lines above the header, `;`, a total below.
GERMAN = (
    "Kontonummer;DE12 5001 0517 0648 4898 90\n"
    "Zeitraum;01.10.2026 - 31.10.2026\n"
    "\n"
    "Buchungstag;Verwendungszweck;Betrag\n"
    "01.10.2026;Miete Oktober;-1.250,00\n"
    "02.10.2026;Gutschrift Kunde 4711;3.445,63\n"
    "31.10.2026;Kontoführung;-0,99\n"
    "Summe;;2.194,64\n"
).encode()


def source_with(
    runtime: Runtime, tenant: Tenant, body: dict[str, Any], name: str | None = None
) -> Resource:
    name = name or f"bank {next(_names)}"
    declared = parsed(DeclaredLayout, body)
    definition = SourceDefinition(
        name, columns=declared.declared_columns(), layout=declared.file_layout()
    )
    return runtime.sources.create_source(workspace_id=tenant.workspace_id, definition=definition)


def deliver(runtime: Runtime, tenant: Tenant, source: Resource, content: bytes) -> FileRecord:
    service = runtime.uploads
    staged = service.stage_csv([content])
    accepted = service.queue_upload(
        workspace_id=tenant.workspace_id,
        source_id=source.id,
        staged=staged,
        filename=None,
        idempotency_key=None,
    )
    run_pipeline(runtime)
    with runtime.engine.connect() as conn:
        return files.get_file(conn, accepted.file_id)


def rows_of(runtime: Runtime, tenant: Tenant, source_id: int) -> list[dict[str, Any]]:
    return read_data(runtime, tenant, source_id, page_size=10_000)


def delivered(runtime: Runtime, tenant: Tenant, body: dict[str, Any], content: bytes) -> Any:
    source = source_with(runtime, tenant, body)
    record = deliver(runtime, tenant, source, content)
    assert (record.status, record.error) == ("delivered", None)
    return rows_of(runtime, tenant, source.id)


def failed(runtime: Runtime, tenant: Tenant, body: dict[str, Any], content: bytes) -> str:
    source = source_with(runtime, tenant, body)
    record = deliver(runtime, tenant, source, content)
    assert record.status == "failed"
    assert rows_of(runtime, tenant, source.id) == []
    assert record.error is not None
    return record.error


def test_a_german_export_with_its_preamble_and_total(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 3, "skip_trailing_lines": 1}
    rows = delivered(runtime, ingestion_tenant, body, GERMAN)
    assert [tuple(r.values()) for r in rows] == [
        ("2026-10-01", "Miete Oktober", Decimal("-1250.00")),
        ("2026-10-02", "Gutschrift Kunde 4711", Decimal("3445.63")),
        ("2026-10-31", "Kontoführung", Decimal("-0.99")),
    ]
    assert list(rows[0]) == ["Buchungstag", "Verwendungszweck", "Betrag"]


@pytest.mark.parametrize(
    "odd", ["\x0c", "\x85", "\u2028", "\x1e"], ids=["form feed", "NEL", "U+2028", "RS"]
)
def test_a_preamble_line_holding_a_character_python_splits_lines_at_is_one_line(
    runtime: Runtime, ingestion_tenant: Tenant, odd: str
) -> None:
    # The delimiter is sniffed after the preamble: counted as the reader counts lines
    # (at line feeds), not as str.splitlines does, which also splits at these.
    content = GERMAN.decode().replace("Kontonummer;", f"Konto{odd}nummer;", 1).replace("\n\n", "\n")
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 2, "skip_trailing_lines": 1}
    rows = delivered(runtime, ingestion_tenant, body, content.encode())
    assert [r["Betrag"] for r in rows] == [
        Decimal("-1250.00"),
        Decimal("3445.63"),
        Decimal("-0.99"),
    ]


def test_a_french_export_with_spaces_between_thousands(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    body = {
        "columns": [
            {"name": "Date", "type": "date", "format": "DD/MM/YYYY"},
            {"name": "Libellé", "type": "text"},
            {
                "name": "Montant",
                "type": "decimal",
                "decimal_separator": ",",
                "thousands_separator": " ",
            },
        ]
    }
    content = (
        "Date;Libellé;Montant\n"
        "01/10/2026;Loyer;-1 234,56\n"  # a space
        "02/10/2026;Virement reçu;12\u00a0345,00\n"  # a no-break space
        "03/10/2026;Frais;1\u202f000\n"  # a narrow no-break space, no decimals
        "04/10/2026;Intérêts;0,07\n"
    ).encode()
    rows = delivered(runtime, ingestion_tenant, body, content)
    assert [(r["Date"], r["Montant"]) for r in rows] == [
        ("2026-10-01", Decimal("-1234.56")),
        ("2026-10-02", Decimal("12345.00")),
        ("2026-10-03", Decimal("1000.00")),
        ("2026-10-04", Decimal("0.07")),
    ]  # fmt: skip


def test_uk_and_us_dates_of_the_same_day(runtime: Runtime, ingestion_tenant: Tenant) -> None:
    body = {
        "columns": [
            {"name": "uk", "type": "date", "format": "DD/MM/YYYY"},
            {"name": "us", "type": "date", "format": "MM/DD/YYYY"},
            {"name": "us_short", "type": "date", "format": "M/D/YYYY"},
            {"name": "at", "type": "timestamp", "format": "DD/MM/YYYY HH:mm:ss"},
            {"name": "compact", "type": "date", "format": "YYYYMMDD"},
        ]
    }
    content = (
        b"uk,us,us_short,at,compact\n"
        b"01/10/2026,10/01/2026,10/1/2026,01/10/2026 09:30:05,20261001\n"
        b"31/12/2026,12/31/2026,1/5/2026,31/12/2026 23:59:59,\n"
    )
    rows = delivered(runtime, ingestion_tenant, body, content)
    assert list(rows[0]) == ["uk", "us", "us_short", "at", "compact"]
    assert [tuple(r.values()) for r in rows] == [
        ("2026-10-01", "2026-10-01", "2026-10-01", "2026-10-01T09:30:05", "2026-10-01"),
        ("2026-12-31", "2026-12-31", "2026-01-05", "2026-12-31T23:59:59", None),
    ]


def test_us_parentheses_and_debit_credit_marks(runtime: Runtime, ingestion_tenant: Tenant) -> None:
    body = {
        "columns": [
            {"name": "Date", "type": "date", "format": "MM/DD/YYYY"},
            {
                "name": "Amount",
                "type": "decimal",
                "thousands_separator": ",",
                "negative": ["minus", "parentheses"],
            },
            {"name": "Ledger", "type": "decimal", "negative": ["dr_cr", "trailing_minus"]},
            {"name": "Count", "type": "integer", "thousands_separator": ","},
        ]
    }
    content = (
        b"Date,Amount,Ledger,Count\n"
        b'10/01/2026,(12.50),12.50 DR,"1,234"\n'
        b'10/02/2026,"(1,234.50)",12.50 CR,7\n'
        b'10/03/2026,"1,000,000.01",3.10-,\n'
        b"10/04/2026,-0.25,7.5dr,0\n"
    )
    rows = delivered(runtime, ingestion_tenant, body, content)
    assert list(rows[0]) == ["Date", "Amount", "Ledger", "Count"]
    assert [tuple(r.values()) for r in rows] == [
        ("2026-10-01", Decimal("-12.50"), Decimal("-12.50"), 1234),
        ("2026-10-02", Decimal("-1234.50"), Decimal("12.50"), 7),
        ("2026-10-03", Decimal("1000000.01"), Decimal("-3.10"), None),
        ("2026-10-04", Decimal("-0.25"), Decimal("-7.50"), 0),
    ]


def test_later_files_are_read_with_the_same_layout(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 3, "skip_trailing_lines": 1}
    source = source_with(runtime, ingestion_tenant, body)
    assert deliver(runtime, ingestion_tenant, source, GERMAN).status == "delivered"
    november = GERMAN.replace(b"31.10.", b"30.11.").replace(b".10.", b".11.")
    november = november.replace(b"3.445,63", b"3.445,64")
    assert deliver(runtime, ingestion_tenant, source, november).status == "delivered"
    amounts = [r["Betrag"] for r in rows_of(runtime, ingestion_tenant, source.id)]
    assert sum(amounts) == Decimal("2194.64") * 2 + Decimal("0.01")


@pytest.mark.parametrize(
    ("line", "value", "reason"),
    [
        ("02.10.2026;Gutschrift;3,445.63", "3,445.63", "does not fit"),  # US separators
        ("02.10.2026;Gutschrift;(3.445,63)", "(3.445,63)", "does not fit"),  # undeclared form
        ("02.10.2026;Gutschrift;34.45,63", "34.45,63", "does not fit"),  # a bad group
        ("2026-10-02;Gutschrift;3.445,63", "2026-10-02", "does not fit"),  # ISO, not declared
        ("31.02.2026;Gutschrift;3.445,63", "31.02.2026", "is not a date"),  # not in the calendar
    ],
)
def test_a_value_that_does_not_fit_fails_the_file_naming_line_column_and_value(
    runtime: Runtime, ingestion_tenant: Tenant, line: str, value: str, reason: str
) -> None:
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 3, "skip_trailing_lines": 1}
    lines = GERMAN.decode().splitlines()
    lines[5] = line  # the file's sixth line
    error = failed(runtime, ingestion_tenant, body, ("\n".join(lines) + "\n").encode())
    column = "Buchungstag" if value.count(".") == 2 or "-" in value else "Betrag"
    assert error.startswith(f"line 6, column {column!r}: value {value!r} {reason}"), error


def test_a_totals_line_not_declared_fails_the_file(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 3}
    error = failed(runtime, ingestion_tenant, body, GERMAN)
    assert error.startswith("line 8, column 'Buchungstag': value 'Summe'"), error


def test_a_preamble_not_declared_fails_the_file(runtime: Runtime, ingestion_tenant: Tenant) -> None:
    body = {"columns": GERMAN_COLUMNS, "skip_trailing_lines": 1}
    error = failed(runtime, ingestion_tenant, body, GERMAN)
    assert "missing columns" in error, error


def test_admin_load_declares_the_same_columns(runtime: Runtime, tenant: Tenant) -> None:
    path = write_file(GERMAN)
    try:
        result = runtime.catalogue.create_source_from_file(
            workspace_id=tenant.workspace_id,
            name="cli bank",
            path=path,
            declared={"columns": GERMAN_COLUMNS, "skip_leading_lines": 3, "skip_trailing_lines": 1},
        )
        with pytest.raises(LoadError) as caught:
            runtime.catalogue.create_source_from_file(
                workspace_id=tenant.workspace_id,
                name="cli bank 2",
                path=path,
                declared={"columns": GERMAN_COLUMNS, "skip_leading_lines": 3},
            )
        with pytest.raises(InvalidBodyError) as refused:
            runtime.catalogue.create_source_from_file(
                workspace_id=tenant.workspace_id,
                name="cli bank 3",
                path=path,
                declared={"columns": [{"name": "a", "type": "date", "format": "DD/MM/YY"}]},
            )
    finally:
        path.unlink()
    assert result.rows == 3
    rows = rows_of(runtime, tenant, result.resource.id)
    assert [r["Betrag"] for r in rows] == [
        Decimal("-1250.00"),
        Decimal("3445.63"),
        Decimal("-0.99"),
    ]
    assert caught.value.line == 8
    assert [p.field for p in refused.value.problems] == ["columns[0].format"]


def test_an_ambiguous_date_column_is_kept_as_text_and_the_status_says_how_to_declare_it(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = source_with(runtime, ingestion_tenant, {"columns": None}, name="inferred")
    content = b"day,uk_only,amount\n01/10/2026,31/10/2026,1.50\n02/11/2026,01/11/2026,2.00\n"
    record = deliver(runtime, ingestion_tenant, source, content)
    assert (record.status, record.error) == ("delivered", None)
    assert record.warnings is not None
    assert len(record.warnings) == 2
    ambiguous, uk_only = record.warnings
    assert "column 'day' was loaded as text" in ambiguous
    assert "DD/MM/YYYY or MM/DD/YYYY" in ambiguous
    assert '"format": "DD/MM/YYYY"' in ambiguous
    assert "column 'uk_only'" in uk_only
    assert "dates in DD/MM/YYYY," in uk_only
    assert rows_of(runtime, ingestion_tenant, source.id)[0] == {
        "day": "01/10/2026",
        "uk_only": "31/10/2026",
        "amount": Decimal("1.50"),
    }


def test_a_clean_file_loads_as_before_without_warnings(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    source = source_with(runtime, ingestion_tenant, {"columns": None}, name="clean")
    record = deliver(runtime, ingestion_tenant, source, b"day,memo\n2026-10-01,a/b/c\n")
    assert (record.status, record.warnings) == ("delivered", None)
    assert rows_of(runtime, ingestion_tenant, source.id) == [{"day": "2026-10-01", "memo": "a/b/c"}]


def test_json_rows_are_read_in_the_clean_form(runtime: Runtime, ingestion_tenant: Tenant) -> None:
    """CSV tally makes from JSON rows has JSON's numbers and no line around the rows."""
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 3, "skip_trailing_lines": 1}
    source = source_with(runtime, ingestion_tenant, body)
    staged = runtime.uploads.stage_json(
        [b'[{"Buchungstag": "2026-10-01", "Verwendungszweck": "x", "Betrag": -1250.5}]']
    )
    accepted = runtime.uploads.queue_upload(
        workspace_id=ingestion_tenant.workspace_id,
        source_id=source.id,
        staged=staged,
        filename=None,
        idempotency_key=None,
    )
    run_pipeline(runtime)
    with runtime.engine.connect() as conn:
        record = files.get_file(conn, accepted.file_id)
    assert (record.status, record.error) == ("delivered", None)
    assert rows_of(runtime, ingestion_tenant, source.id) == [
        {"Buchungstag": "2026-10-01", "Verwendungszweck": "x", "Betrag": Decimal("-1250.50")}
    ]


@pytest.fixture
def checked_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file takes the large files' path: checked by a second process while this
    one stages its rows as read (on PostgreSQL COPYed straight into the table)."""
    monkeypatch.setattr(load_module, "PARALLEL_CHECK_MIN_BYTES", 0)
    monkeypatch.setattr(staged_module, "PARALLEL_CHECK_MIN_BYTES", 0)


@pytest.mark.usefixtures("checked_aside")
def test_large_files_stage_their_rewritten_rows_beside_the_checks(
    runtime: Runtime, ingestion_tenant: Tenant
) -> None:
    body = {"columns": GERMAN_COLUMNS, "skip_leading_lines": 3, "skip_trailing_lines": 1}
    rows = delivered(runtime, ingestion_tenant, body, GERMAN)
    assert [r["Betrag"] for r in rows] == [
        Decimal("-1250.00"),
        Decimal("3445.63"),
        Decimal("-0.99"),
    ]
    widened = {
        "columns": [
            {"name": "n", "type": "integer", "decimal_separator": ","},
            {"name": "x", "type": "text"},
        ],
        "skip_trailing_lines": 1,
    }
    content = b"n;x\n1;a\n2,5;b\ntotal\n"  # an integer column widens to decimal in the checks
    assert delivered(runtime, ingestion_tenant, widened, content) == [
        {"n": Decimal("1.0"), "x": "a"},
        {"n": Decimal("2.5"), "x": "b"},
    ]
    lines = GERMAN.decode().splitlines()
    lines[4] = "01.10.2026;Miete;1,250.00"
    error = failed(runtime, ingestion_tenant, body, ("\n".join(lines) + "\n").encode())
    assert error.startswith("line 5, column 'Betrag': value '1,250.00' does not fit"), error


def test_postgresql_rewrites_the_formats_in_sql(
    runtime: Runtime, ingestion_tenant: Tenant, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the file's bytes, less the lines skipped, are COPYed while the checks
    run, and one INSERT ... SELECT rewrites the formats (decision 0004): the rows the
    checks read are never sent again. SQLite's rows are rewritten as they are read."""
    if backend == "postgresql":

        def sent_again(*_: object) -> None:
            raise AssertionError("the rows were sent again, not converted in SQL")

        monkeypatch.setattr(PostgresBulkLoad, "_send_rows", sent_again)
    body = {
        "columns": [
            {"name": "At", "type": "timestamp", "format": "MM/DD/YYYY HH:mm"},
            {
                "name": "Amount",
                "type": "decimal",
                "thousands_separator": " ",
                "decimal_separator": ",",
                "negative": ["minus", "parentheses", "dr_cr", "trailing_minus"],
            },
            {"name": "Count", "type": "integer", "thousands_separator": "'"},
        ],
        "skip_leading_lines": 1,
        "skip_trailing_lines": 1,
    }
    content = (
        "Account 4711\n"
        "At;Amount;Count\n"
        "10/01/2026 09:30;(1 234,50);1'234\n"
        "10/02/2026 10:00;12\u00a0345,5 DR;7\n"
        "10/03/2026 11:00;1,5-;\n"
        "10/04/2026 12:00;7 cr;0\n"
        "Total;;\n"
        "\n"
    ).encode()
    rows = delivered(runtime, ingestion_tenant, body, content)
    assert [tuple(r.values()) for r in rows] == [
        ("2026-10-01T09:30:00", Decimal("-1234.50"), 1234),
        ("2026-10-02T10:00:00", Decimal("-12345.50"), 7),
        ("2026-10-03T11:00:00", Decimal("-1.50"), None),
        ("2026-10-04T12:00:00", Decimal("7.00"), 0),
    ]
