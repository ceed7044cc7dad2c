"""Files shaped like real bank exports, reconciled end to end through the running product
(issue #32's proof for points 1-4), on SQLite and PostgreSQL.

Each test creates its sources with declared columns (`POST /api/v2/sources`, or a
webhook whose file a loopback server holds), delivers the export as a user does (an
upload, or a notification naming the file's URL), defines the reconciliation
(`POST /api/v2/reconciliations`), waits for `tally serve`'s own worker to leave it
`idle`, and compares the output read through the Data API with the expected rows,
exactly: statuses, pairs, reasons, differences and the formatted amounts as decimal
strings. The exports are in tests/support/exports/, as banks write them: a German one
(`;`, `DD.MM.YYYY`, `1.234,56`, Soll and Haben, account lines above the header and a
totals line below), a French one (`;`, `DD/MM/YYYY`, `3 450,00` with narrow and plain
no-break spaces), a UK multi-currency one (`DD/MM/YYYY`, `1,250.00 CR`, `450.00 DR`,
`(3,100.00)`; GBP, EUR and USD), a US one (`MM/DD/YYYY`, `-1250.00`, `(312.45)`); the
ledgers are clean. One more reads the French export as text and converts it in a
transformation (`to_date`, `parse_decimal`) that is then reconciled; and one loads the
UK export into a source without declared columns: text, and a warning naming the formats.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.derived_runs import WAIT_SECONDS
from support.factories import Tenant, make_tenant
from support.processes import (
    Processes,
    ServeProcess,
    notify,
    process_defaults,
    wait_for_final_files,
)
from support.reconciliation_cases import split
from support.servers import file_server_app, serve_app
from support.waiting import eventually
from tally.runtime import Runtime
from tally.settings import Settings

EXPORTS = Path(__file__).resolve().parents[1] / "support" / "exports"
CSV = {"content-type": "text/csv"}
Row = tuple[Any, ...]


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request,
        backend,
        tmp_path / "home",
        **process_defaults(serve_worker=True, derived_burst_seconds=0.2),
    )


@dataclass
class Product:
    """tally serve (with its worker) on the test's database, a tenant, and a loopback
    server holding the files a webhook is told about."""

    client: httpx.Client
    tenant: Tenant
    serve: ServeProcess
    files: dict[str, bytes]
    files_url: str

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(path, json=body, headers=self.tenant.v2_headers)
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    def get(self, path: str) -> dict[str, Any]:
        response = self.client.get(path, headers=self.tenant.v2_headers)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]


@pytest.fixture
def product(settings: Settings, runtime: Runtime, processes: Processes) -> Iterator[Product]:
    serve = processes.serve(settings)
    tenant = make_tenant(runtime.engine, ingestion=True)
    files: dict[str, bytes] = {}
    serve.wait_ready()
    with (
        serve_app(file_server_app(files)) as files_url,
        httpx.Client(base_url=serve.url, timeout=30) as client,
    ):
        yield Product(client, tenant, serve, files, files_url)


# --- delivering files as a user does ------------------------------------------------------


def export(name: str) -> bytes:
    return (EXPORTS / name).read_bytes()


def uploaded_source(product: Product, name: str, file: str, layout: dict[str, Any]) -> int:
    """A source created with `layout` (its columns, lines to skip), the file uploaded to
    it and delivered."""
    source_id = int(product.post("/api/v2/sources", {"name": name, **layout})["id"])
    response = product.client.post(
        f"/api/v2/sources/{source_id}/feed-source",
        content=export(file),
        headers={**product.tenant.v2_headers, **CSV},
    )
    assert response.status_code == 202, response.text
    delivered(product, source_id)
    return source_id


def webhook_source(product: Product, name: str, file: str, layout: dict[str, Any]) -> int:
    """A webhook created with `layout`, notified of the file on the loopback server,
    which the worker downloads and delivers."""
    body = {"name": name, "webhook": {}, **layout}
    webhook = product.post("/api/v2/webhooks", body)
    product.files[file] = export(file)
    reply = notify(product.client, webhook["webhook_id"], f"{product.files_url}/files/{file}")
    assert reply.status_code == 200, reply.text
    delivered(product, int(webhook["id"]))
    return int(webhook["id"])


def delivered(product: Product, source_id: int) -> None:
    [file] = wait_for_final_files(
        product.client,
        product.tenant,
        source_id,
        count=1,
        timeout=WAIT_SECONDS,
        also=product.serve.describe,
    )
    assert (file["status"], file["error"], file["warnings"]) == ("delivered", None, []), file


# --- reconciling and reading the output -----------------------------------------------------


def idle(product: Product, path: str) -> dict[str, Any]:
    """The derived resource once its first run has ended and it is idle."""

    def done() -> dict[str, Any] | None:
        shown = product.get(path)
        assert shown["state"] != "failed", shown["error"]
        return shown if shown["state"] == "idle" and shown["last_run"] else None

    return eventually(
        done, timeout=WAIT_SECONDS, what=f"{path} idle", explain=product.serve.describe
    )


def amounts(matched: str, unmatched: str, per_status: dict[str, str]) -> dict[str, Any]:
    """One side's last_run amounts, none resolved."""
    return {
        "matched": matched,
        "unmatched": unmatched,
        "resolved": "0.00",
        "matched_by_status": per_status,
    }


def reconciled(product: Product, definition: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """last_run of the reconciliation's first run, and its output resource."""
    created = product.post("/api/v2/reconciliations", definition)
    shown = idle(product, f"/api/v2/reconciliations/{created['id']}")
    return shown["last_run"], int(created["resource_id"])


def data(product: Product, resource_id: int, **params: str) -> list[dict[str, Any]]:
    """Every row of the resource through the Data API; decimals keep their digits."""
    response = product.client.get(
        f"/api/v1/resources/{resource_id}/data",
        params={"page_size": "100", **params},
        headers=product.tenant.headers,
    )
    assert response.status_code == 200, response.text
    body = json.loads(response.text, parse_float=Decimal)
    assert body["meta"]["total_count"] == len(body["data"])
    return body["data"]  # type: ignore[no-any-return]


def loaded(product: Product, resource_id: int, columns: list[str]) -> list[Row]:
    """The source's rows as loaded, in file order: `columns` of each, decimals as text."""
    rows = data(product, resource_id, ordering="_row")
    return [tuple(_plain(row[c]) for c in columns) for row in rows]


def output(product: Product, resource_id: int, columns: list[str]) -> list[Row]:
    """The reconciliation's output rows, in bank then ledger row order (a side's missing
    row last): `columns` of each, decimals as their exact digits."""
    rows = sorted(
        data(product, resource_id), key=lambda r: (_at(r["bank._row"]), _at(r["ledger._row"]))
    )
    return [tuple(_plain(row[c]) for c in columns) for row in rows]


def _at(row: int | None) -> int:
    return row if row is not None else 1 << 62


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Decimal) else value


PAIRS = ["bank._row", "ledger._row", "status", "pass", "difference"]


def reasons(product: Product, resource_id: int) -> list[str]:
    """The output's reasons, in the order of `output`."""
    return [reason for (reason,) in output(product, resource_id, ["reason"])]


def side(name: str, resource_id: int, amount: Any, date: str, **more: str) -> dict[str, Any]:
    return {"name": name, "resource_id": resource_id, "amount": amount, "date": date, **more}


def one_to_one(name: str, left: str, right: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "type": "one_to_one", "keys": [{"left": left, "right": right}], **more}


def text(name: str) -> dict[str, str]:
    return {"name": name, "type": "text"}


def date(name: str, **more: str) -> dict[str, str]:
    return {"name": name, "type": "date", **more}


def decimal(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "type": "decimal", "scale": 2, **more}


# --- Germany: Soll and Haben, a preamble and a totals line --------------------------------

GERMAN_NUMBER = {"decimal_separator": ",", "thousands_separator": "."}
GERMAN_BANK = {
    "columns": [
        date("Buchungstag", format="DD.MM.YYYY"),
        date("Wertstellung", format="DD.MM.YYYY"),
        text("Verwendungszweck"),
        text("Referenz"),
        decimal("Soll", **GERMAN_NUMBER),
        decimal("Haben", **GERMAN_NUMBER),
    ],
    "skip_leading_lines": 3,  # account holder, IBAN, period
    "skip_trailing_lines": 1,  # Summe
}
GERMAN_LEDGER = {"columns": [date("posted"), text("reference"), text("account"), decimal("amount")]}


def test_a_german_export_with_soll_and_haben_reconciles_against_its_ledger(
    product: Product,
) -> None:
    bank = uploaded_source(product, "bank", "de_bank.csv", GERMAN_BANK)
    ledger = uploaded_source(product, "ledger", "de_ledger.csv", GERMAN_LEDGER)
    last_run, resource_id = reconciled(
        product,
        {
            "name": "Sparkasse gegen Hauptbuch",
            "left": side("bank", bank, {"credit": "Haben", "debit": "Soll"}, "Buchungstag"),
            "right": side("ledger", ledger, "amount", "posted"),
            "passes": [
                one_to_one("Referenz", "Referenz", "reference"),
                one_to_one("Referenz, Datum", "Referenz", "reference", date_window=[-3, 3]),
            ],
        },
    )

    columns = ["Buchungstag", "Wertstellung", "Soll", "Haben"]
    assert loaded(product, bank, columns) == [
        ("2026-10-01", "2026-10-01", None, "1234.56"),
        ("2026-10-02", "2026-10-02", "2500.00", None),
        ("2026-10-05", "2026-10-05", None, "12345.67"),
        ("2026-10-06", "2026-10-07", "980.40", None),
        ("2026-10-09", "2026-10-09", "12.90", None),
        ("2026-10-12", "2026-10-12", None, "500.00"),
    ]  # the totals line is not a row; it holds the columns' sums
    soll, haben = (
        sum(Decimal(v) for *_, v in loaded(product, bank, [c]) if v) for c in ("Soll", "Haben")
    )
    assert (soll, haben) == (Decimal("3493.30"), Decimal("14080.23"))  # Summe;;;;3.493,30;14.080,23
    assert output(product, resource_id, PAIRS) == [
        (1, 1, "matched", "Referenz", "0.00"),
        (2, 2, "matched", "Referenz", "0.00"),  # Soll 2.500,00 against -2500.00
        (3, 3, "matched", "Referenz", "0.00"),
        (4, 4, "matched", "Referenz, Datum", "0.00"),
        (5, None, "unmatched", None, None),
        (6, None, "unmatched", None, None),
        (None, 5, "unmatched", None, None),
        (None, 6, "unmatched", None, None),
    ]
    assert reasons(product, resource_id) == [
        "Referenz: keys equal, amount equal, date equal",
        "Referenz: keys equal, amount equal, date equal",
        "Referenz: keys equal, amount equal, date equal",
        "Referenz, Datum: keys equal, amount equal, ledger date 2 days earlier (window -3..3)",
        "no ledger row with reference 'GEB-10'",
        "Referenz, Datum: nearest ledger row 5 (reference RE-2026-103): "
        "amount differs by 500.00, tolerance 0.00",
        "Referenz, Datum: nearest bank row 6 (Referenz RE-2026-103): "
        "amount differs by 500.00, tolerance 0.00",
        "no bank row with Referenz 'RE-2026-104'",
    ]
    assert (last_run["counts"]["matched"], last_run["mode"]) == (4, "full")
    assert last_run["amounts"] == {  # Haben minus Soll
        "left": {
            "matched": "10099.83",
            "unmatched": "487.10",
            "resolved": "0.00",
            "matched_by_status": split(matched="10099.83"),
        },
        "right": {
            "matched": "10099.83",
            "unmatched": "1750.00",
            "resolved": "0.00",
            "matched_by_status": split(matched="10099.83"),
        },
    }


# --- France: narrow no-break spaces, a split payment --------------------------------------

FRENCH_NUMBER = {"decimal_separator": ",", "thousands_separator": "\u202f"}
FRENCH_BANK = {
    "columns": [
        date("Date opération", format="DD/MM/YYYY"),
        date("Date valeur", format="DD/MM/YYYY"),
        text("Libellé"),
        text("Référence"),
        decimal("Montant", **FRENCH_NUMBER),
    ],
    "skip_leading_lines": 2,  # account, period
}
FRENCH_LEDGER = {"columns": [date("date"), text("piece"), text("libelle"), decimal("amount")]}


def french_passes(bank_key: str) -> list[dict[str, Any]]:
    window = {"date_window": [-3, 3]}
    return [
        one_to_one("pièce", bank_key, "piece"),
        one_to_one("pièce, écart", bank_key, "piece", amount_tolerance="1.00", **window),
        {
            "name": "pièce, règlement groupé",
            "type": "one_to_many",
            "keys": [{"left": bank_key, "right": "piece"}],
            **window,
        },
    ]


FRENCH_PAIRS = [
    (1, 1, "matched", "pièce, règlement groupé", "0.00"),  # 3 450,00 = 2000.00 + 1450.00
    (1, 2, "matched", "pièce, règlement groupé", "0.00"),
    (2, 3, "matched", "pièce", "0.00"),
    (3, 4, "matched", "pièce", "0.00"),
    (4, None, "unmatched", None, None),
    (5, 5, "matched_with_difference", "pièce, écart", "0.50"),
]
FRENCH_AMOUNTS = {
    "left": {
        "matched": "15495.77",
        "unmatched": "-89.90",
        "resolved": "0.00",
        "matched_by_status": split(matched="14245.27", matched_with_difference="1250.50"),
    },
    "right": {
        "matched": "15495.27",
        "unmatched": "0.00",
        "resolved": "0.00",
        "matched_by_status": split(matched="14245.27", matched_with_difference="1250.00"),
    },
}


def test_a_french_export_with_narrow_spaces_reconciles_by_webhook(product: Product) -> None:
    bank = webhook_source(product, "banque", "fr_bank.csv", FRENCH_BANK)
    ledger = uploaded_source(product, "grand-livre", "fr_ledger.csv", FRENCH_LEDGER)
    last_run, resource_id = reconciled(
        product,
        {
            "name": "Banque contre grand livre",
            "left": side("bank", bank, "Montant", "Date opération"),
            "right": side("ledger", ledger, "amount", "date"),
            "passes": french_passes("Référence"),
        },
    )

    assert loaded(product, bank, ["Date opération", "Référence", "Montant"]) == [
        ("2026-10-01", "FAC-0311", "3450.00"),  # 3\u202f450,00
        ("2026-10-03", "URSSAF-10", "-1204.73"),  # -1\u202f204,73
        ("2026-10-08", "FAC-0312", "12000.00"),  # 12\u00a0000,00
        ("2026-10-15", "CB-5521", "-89.90"),
        ("2026-10-28", "FAC-0313", "1250.50"),  # 1 250,50
    ]
    assert output(product, resource_id, PAIRS) == FRENCH_PAIRS
    assert reasons(product, resource_id) == [
        "pièce, règlement groupé: keys equal, sum equal, ledger dates 1 day earlier (window -3..3)",
        "pièce, règlement groupé: keys equal, sum equal, ledger dates 1 day earlier (window -3..3)",
        "pièce: keys equal, amount equal, date equal",
        "pièce: keys equal, amount equal, date equal",
        "no ledger row with piece 'CB-5521'",
        "pièce, écart: keys equal, amount differs by 0.50 (tolerance 1.00), date equal",
    ]
    assert last_run["amounts"] == FRENCH_AMOUNTS


# --- The United Kingdom: DR and CR, parentheses; three currencies -------------------------

UK_NUMBER = {"thousands_separator": ",", "negative": ["dr_cr", "parentheses"]}
UK_BANK = {
    "columns": [
        date("Date", format="DD/MM/YYYY"),
        text("Currency"),
        text("Description"),
        text("Reference"),
        decimal("Amount", **UK_NUMBER),
        decimal("Balance", **UK_NUMBER),
    ]
}
UK_LEDGER = {"columns": [date("date"), text("reference"), text("currency"), decimal("amount")]}


def test_a_uk_multi_currency_export_never_matches_across_currencies(product: Product) -> None:
    bank = uploaded_source(product, "bank", "uk_bank.csv", UK_BANK)
    ledger = uploaded_source(product, "ledger", "uk_ledger.csv", UK_LEDGER)
    last_run, resource_id = reconciled(
        product,
        {
            "name": "Multi-currency account vs ledger",
            "left": side("bank", bank, "Amount", "Date", currency="Currency"),
            "right": side("ledger", ledger, "amount", "date", currency="currency"),
            "passes": [
                one_to_one("reference", "Reference", "reference", amount_tolerance="0.05"),
                {
                    "name": "amount and date",
                    "type": "one_to_one",
                    "keys": [],
                    "date_window": [-1, 1],
                    "auto_confirm": False,
                },
            ],
        },
    )

    assert loaded(product, bank, ["Currency", "Amount", "Balance"]) == [
        ("GBP", "1250.00", "11250.00"),
        ("EUR", "2000.00", "2000.00"),
        ("USD", "-3100.00", "-3100.00"),
        ("GBP", "-450.00", "10800.00"),
        ("EUR", "800.00", "2800.00"),
        ("USD", "-25.00", "-3125.00"),
    ]
    rows = output(product, resource_id, [*PAIRS, "bank.Currency", "ledger.currency"])
    assert rows == [
        (1, 1, "matched", "reference", "0.00", "GBP", "GBP"),
        (2, None, "unmatched", None, None, "EUR", None),  # INV-502: EUR paid, GBP booked
        (3, 3, "matched", "reference", "0.00", "USD", "USD"),
        (4, 4, "matched", "reference", "0.00", "GBP", "GBP"),
        (5, 5, "matched", "reference", "0.00", "EUR", "EUR"),  # INV-503 in EUR, not USD
        (6, 8, "suggested", "amount and date", "0.00", "USD", "USD"),  # not the GBP fee
        (None, 2, "unmatched", None, None, None, "GBP"),
        (None, 6, "unmatched", None, None, None, "USD"),
        (None, 7, "unmatched", None, None, None, "GBP"),
    ]
    assert reasons(product, resource_id) == [
        "reference: keys equal, amount equal, date equal",
        "reference: nearest ledger row 2 (reference INV-502): currency differs: EUR against GBP",
        "reference: keys equal, amount equal, date equal",
        "reference: keys equal, amount equal, date equal",
        "reference: keys equal, amount equal, date equal",
        "amount and date: amount equal, date equal",
        "reference: nearest bank row 2 (Reference INV-502): currency differs: GBP against EUR",
        "reference: nearest bank row 5 (Reference INV-503): currency differs: USD against EUR",
        # the nearest bank row of its own currency, never the USD fee of the same amount
        "no bank row with Reference 'FEE-OCT-GBP'; amount and date: bank row 4 was matched "
        "to ledger row 4 by pass 'reference'",
    ]
    assert last_run["counts"] == {
        "matched": 4,
        "matched_with_difference": 0,
        "suggested": 1,
        "manual": 0,
        "unmatched_left": 1,
        "unmatched_right": 3,
        "resolved_left": 0,
        "resolved_right": 0,
    }
    assert last_run["amounts"] == {  # each currency alone, never a sum across them
        "EUR": {
            "left": amounts("800.00", "2000.00", split(matched="800.00")),
            "right": amounts("800.00", "0.00", split(matched="800.00")),
        },
        "GBP": {
            "left": amounts("800.00", "0.00", split(matched="800.00")),
            "right": amounts("800.00", "1975.00", split(matched="800.00")),
        },
        "USD": {  # the suggestion: 25.00 of bank fees
            "left": amounts("-3125.00", "0.00", split(matched="-3100.00", suggested="-25.00")),
            "right": amounts("-3125.00", "800.00", split(matched="-3100.00", suggested="-25.00")),
        },
    }


# --- The United States: MM/DD/YYYY, cheques, a deposit without a reference ----------------

US_NUMBER = {"thousands_separator": ",", "negative": ["minus", "parentheses"]}
US_BANK = {
    "columns": [
        text("Details"),
        date("Posting Date", format="MM/DD/YYYY"),
        text("Description"),
        decimal("Amount", **US_NUMBER),
        text("Type"),
        decimal("Balance", **US_NUMBER),
        text("Check or Slip #"),
    ]
}
US_LEDGER = {"columns": [date("date"), text("check_no"), text("payee"), decimal("amount")]}


def test_a_us_export_reconciles_cheques_and_suggests_a_deposit(product: Product) -> None:
    bank = webhook_source(product, "bank", "us_bank.csv", US_BANK)
    ledger = uploaded_source(product, "ledger", "us_ledger.csv", US_LEDGER)
    last_run, resource_id = reconciled(
        product,
        {
            "name": "Checking vs ledger",
            "left": side("bank", bank, "Amount", "Posting Date"),
            "right": side("ledger", ledger, "amount", "date"),
            "passes": [
                {
                    "name": "check number",
                    "type": "one_to_one",
                    "keys": [
                        {
                            "left": "Check or Slip #",
                            "right": "check_no",
                            "normalize": ["strip_leading_zeros"],
                        }
                    ],
                    "date_window": [-7, 0],  # booked when written, cleared later
                },
                {
                    "name": "amount and date",
                    "type": "one_to_one",
                    "keys": [],
                    "date_window": [-2, 2],
                    "auto_confirm": False,
                },
            ],
        },
    )

    assert loaded(product, bank, ["Posting Date", "Amount", "Balance"]) == [
        ("2026-10-02", "-1250.00", "48750.00"),
        ("2026-10-05", "12500.00", "61250.00"),
        ("2026-10-09", "-312.45", "60937.55"),
        ("2026-10-13", "-75.00", "60862.55"),
    ]
    assert output(product, resource_id, PAIRS) == [
        (1, 1, "matched", "check number", "0.00"),  # 001042 is cheque 1042
        (2, 2, "suggested", "amount and date", "0.00"),  # the deposit has no reference
        (3, 3, "matched", "check number", "0.00"),  # (312.45)
        (4, None, "unmatched", None, None),
        (None, 4, "unmatched", None, None),  # not cleared yet
        (None, 5, "unmatched", None, None),
    ]
    assert reasons(product, resource_id) == [
        "check number: keys equal, amount equal, ledger date 1 day earlier (window -7..0)",
        "amount and date: amount equal, ledger date 1 day earlier (window -2..2)",
        "check number: keys equal, amount equal, date equal",
        "check number: nearest ledger row 5 (check_no 1045): amount differs by 18.00, "
        "tolerance 0.00",
        "no bank row with Check or Slip # '1044' (after strip_leading_zeros); amount and "
        "date: nearest bank row 4: amount differs by 335.00, tolerance 0.00",
        "check number: nearest bank row 4 (Check or Slip # 001045): amount differs by 18.00, "
        "tolerance 0.00",
    ]
    assert last_run["amounts"] == {
        "left": amounts("10937.55", "-75.00", split(matched="-1562.45", suggested="12500.00")),
        "right": amounts("10937.55", "-467.00", split(matched="-1562.45", suggested="12500.00")),
    }


# --- A text export converted in a transformation, then reconciled -------------------------

AS_TEXT = {
    "columns": [
        text("Date opération"),
        text("Date valeur"),
        text("Libellé"),
        text("Référence"),
        text("Montant"),
    ],
    "skip_leading_lines": 2,
}
CONVERSION = """
SELECT b."Référence" AS reference,
       to_date(b."Date opération", 'DD/MM/YYYY') AS booked,
       CAST(parse_decimal(b."Montant", ',', ' ') AS DECIMAL(18, 2)) AS amount
FROM b
"""


def test_a_text_export_converted_in_a_transformation_reconciles(product: Product) -> None:
    bank = uploaded_source(product, "banque", "fr_bank.csv", AS_TEXT)
    ledger = uploaded_source(product, "grand-livre", "fr_ledger.csv", FRENCH_LEDGER)
    created = product.post(
        "/api/v2/transformations",
        {"name": "banque convertie", "inputs": {"b": bank}, "sql": CONVERSION},
    )
    assert [(c["name"], c["type"]) for c in created["columns"]] == [
        ("reference", "text"),
        ("booked", "date"),
        ("amount", "decimal"),
    ]
    idle(product, f"/api/v2/transformations/{created['id']}")
    converted = int(created["resource_id"])
    rows = data(product, converted, ordering="_row")
    assert [(r["reference"], r["booked"], _plain(r["amount"])) for r in rows] == [
        ("FAC-0311", "2026-10-01", "3450.00"),
        ("URSSAF-10", "2026-10-03", "-1204.73"),
        ("FAC-0312", "2026-10-08", "12000.00"),
        ("CB-5521", "2026-10-15", "-89.90"),
        ("FAC-0313", "2026-10-28", "1250.50"),
    ]  # U+202F, U+00A0 and a space all taken for the thousands separator ' '
    last_run, resource_id = reconciled(
        product,
        {
            "name": "Banque convertie contre grand livre",
            "left": side("bank", converted, "amount", "booked"),
            "right": side("ledger", ledger, "amount", "date"),
            "passes": french_passes("reference"),
        },
    )
    assert output(product, resource_id, PAIRS) == FRENCH_PAIRS
    assert last_run["amounts"] == FRENCH_AMOUNTS


# --- The same export without declared columns: a warning, not a guess --------------------


def test_an_export_without_declared_formats_loads_as_text_with_a_warning(
    product: Product,
) -> None:
    source_id = int(product.post("/api/v2/sources", {"name": "bank"})["id"])
    response = product.client.post(
        f"/api/v2/sources/{source_id}/feed-source",
        content=export("uk_bank.csv"),
        headers={**product.tenant.v2_headers, **CSV},
    )
    assert response.status_code == 202, response.text
    [file] = wait_for_final_files(
        product.client, product.tenant, source_id, count=1, timeout=WAIT_SECONDS
    )
    assert (file["status"], file["rows"]) == ("delivered", 6)
    [warning] = file["warnings"]
    assert warning.startswith(
        "column 'Date' was loaded as text: its values are dates in DD/MM/YYYY or MM/DD/YYYY, "
        "which tally does not guess;"
    )
    assert '{"name": "Date", "type": "date", "format": "DD/MM/YYYY"}' in warning
    assert loaded(product, source_id, ["Date", "Amount"])[:3] == [
        ("01/10/2026", "1,250.00 CR"),  # kept as the bank wrote it, never 10 January
        ("01/10/2026", "2,000.00 CR"),
        ("02/10/2026", "(3,100.00)"),
    ]
