"""A month as a finance team lives it, through `tally serve` and its worker on both
backends (issue #32's proof for points 5 and 7): a bank's daily statements, in its
own formats (`;`, `DD.MM.YYYY`, `1.234,56`, debit and credit columns, a preamble and a
totals line), appended; the ERP's whole ledger exported every day into a snapshot
source; manual matches made by an analyst over HTTP; a wrong statement taken back in
the middle of the month and delivered again, corrected. After each step the
reconciliation is read through the Data API and compared with the rows expected, and
the manual work with what became of it."""

from __future__ import annotations

import json
import signal
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.databases import make_settings
from support.derived_runs import WAIT_SECONDS, feed
from support.factories import Tenant, make_tenant
from support.processes import Processes, process_defaults, wait_for_final_files
from support.waiting import eventually
from tally.runtime import Runtime
from tally.settings import Settings
from tally.storage import resources

STATEMENT_COLUMNS = [
    {"name": "Buchungstag", "type": "date", "format": "DD.MM.YYYY"},
    {"name": "Verwendungszweck", "type": "text"},
    {"name": "Soll", "type": "decimal", "decimal_separator": ",", "thousands_separator": "."},
    {"name": "Haben", "type": "decimal", "decimal_separator": ",", "thousands_separator": "."},
    {"name": "Waehrung", "type": "text"},
]


def statement(day: int, *lines: str) -> str:
    """A day's statement as the bank writes it: account and period above, totals below."""
    return (
        "Kontonummer;DE12 5001 0517 0648 4898 90\n"
        f"Zeitraum;{day:02d}.10.2026\n"
        "Buchungstag;Verwendungszweck;Soll;Haben;Waehrung\n"
        + "".join(f"{day:02d}.10.2026;{line}\n" for line in lines)
        + "Summe;;;;\n"
    )


def ledger(*lines: str) -> str:
    """The ERP's whole ledger on one day."""
    return "document,amount,posted,currency\n" + "".join(f"{line}\n" for line in lines)


def ordered(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Output rows in one order, whatever their match ids (None before any text)."""
    return sorted(rows, key=lambda row: tuple("" if v is None else v for v in row))


@pytest.fixture
def settings(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Settings:
    return make_settings(
        request, backend, tmp_path / "home", **process_defaults(derived_burst_seconds=0.5)
    )


class Month:
    """The team's sources and reconciliation, driven over HTTP."""

    def __init__(self, client: httpx.Client, runtime: Runtime, tenant: Tenant) -> None:
        self.client, self.runtime, self.tenant = client, runtime, tenant
        self.bank = self._create(
            {
                "name": "Sparkasse",
                "columns": STATEMENT_COLUMNS,
                "skip_leading_lines": 2,
                "skip_trailing_lines": 1,
            }
        )
        self.erp = self._create({"name": "ERP ledger", "mode": "replace"})
        self.files = {self.bank: 0, self.erp: 0}
        self.runs = 0

    def _create(self, body: dict[str, Any]) -> int:
        response = self.client.post("/api/v2/sources", json=body, headers=self.tenant.v2_headers)
        assert response.status_code == 201, response.text
        return int(response.json()["id"])

    def deliver(self, source: int, csv: str) -> int:
        feed(self.client, self.tenant, source, csv)
        self.files[source] += 1
        files = wait_for_final_files(
            self.client, self.tenant, source, count=self.files[source], timeout=WAIT_SECONDS
        )
        assert files[-1]["status"] == "delivered", files[-1]
        return int(files[-1]["id"])

    def reconcile(self) -> int:
        body = {
            "name": "Bank vs ERP",
            "left": {
                "name": "bank",
                "resource_id": self.bank,
                "amount": {"credit": "Haben", "debit": "Soll"},
                "date": "Buchungstag",
                "currency": "Waehrung",
            },
            "right": {
                "name": "erp",
                "resource_id": self.erp,
                "amount": "amount",
                "date": "posted",
                "currency": "currency",
            },
            "passes": [
                {
                    "name": "document",
                    "type": "one_to_one",
                    "keys": [{"left": "Verwendungszweck", "right": "document"}],
                    "date_window": [-3, 3],
                }
            ],
        }
        response = self.client.post(
            "/api/v2/reconciliations", json=body, headers=self.tenant.v2_headers
        )
        assert response.status_code == 201, response.text
        self.reconciliation = int(response.json()["id"])
        self.output = int(response.json()["resource_id"])
        return self.reconciliation

    def settled(self) -> dict[str, Any]:
        """The reconciliation once it is idle after its inputs' last change."""

        def idle() -> dict[str, Any] | None:
            shown: dict[str, Any] = self.client.get(
                f"/api/v2/reconciliations/{self.reconciliation}", headers=self.tenant.v2_headers
            ).json()
            with self.runtime.engine.connect() as conn:
                versions = [resources.get_resource(conn, s).data_version for s in self.files]
            read = (shown.get("last_run") or {}).get("inputs", {})
            done = [read.get(side, {}).get("data_version") for side in ("left", "right")]
            return shown if shown["state"] == "idle" and done == versions else None

        return eventually(idle, timeout=WAIT_SECONDS, what="the reconciliation to settle")

    def rows(self) -> list[tuple[Any, ...]]:
        """The output as (status, bank purpose, erp document, difference), in match order."""
        self.settled()
        response = self.client.get(
            f"/api/v1/resources/{self.output}/data",
            params={"page_size": 100, "ordering": "match_id"},
            headers=self.tenant.headers,
        )
        assert response.status_code == 200, response.text
        data = json.loads(response.content, parse_float=Decimal)["data"]
        found = [
            (
                r["status"],
                r["bank.Verwendungszweck"],
                r["erp.document"],
                None if r["difference"] is None else str(r["difference"]),
            )
            for r in data
        ]
        return ordered(found)

    def match(self, bank_row: int, erp_row: int, note: str) -> None:
        response = self.client.post(
            f"/api/v2/reconciliations/{self.reconciliation}/matches",
            json={"left_rows": [bank_row], "right_rows": [erp_row], "note": note},
            headers=self.tenant.v2_headers,
        )
        assert response.status_code == 201, response.text

    def actions(self) -> list[dict[str, Any]]:
        response = self.client.get(
            f"/api/v2/reconciliations/{self.reconciliation}/actions",
            headers=self.tenant.v2_headers,
        )
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["data"]
        return found

    def retract(self, source: int, file_id: int) -> dict[str, Any]:
        response = self.client.delete(
            f"/api/v2/sources/{source}/files/{file_id}", headers=self.tenant.v2_headers
        )
        assert response.status_code == 200, response.text
        shown: dict[str, Any] = response.json()
        return shown


def test_a_month_of_statements_and_ledger_snapshots_reconciles_and_keeps_the_work(
    settings: Settings, runtime: Runtime, processes: Processes
) -> None:
    serve = processes.serve(settings, serve_worker=True)
    tenant = make_tenant(runtime.engine, ingestion=True)
    serve.wait_ready()
    with httpx.Client(base_url=serve.url, timeout=30) as client:
        month = Month(client, runtime, tenant)
        month.deliver(month.bank, statement(1, "INV-1;;1.200,00;EUR", "Gebuehr Oktober;4,90;;EUR"))
        month.deliver(
            month.erp,
            ledger("INV-1,1200.00,2026-10-01,EUR", "FEE-10,-4.90,2026-10-01,EUR"),
        )
        month.reconcile()
        assert month.rows() == ordered(
            [
                ("matched", "INV-1", "INV-1", "0.00"),
                ("unmatched", "Gebuehr Oktober", None, None),
                ("unmatched", None, "FEE-10", None),
            ]
        )
        # The analyst pairs the fee by hand (bank row 2, ERP row 2).
        month.match(2, 2, "October's account fee")
        assert ("manual", "Gebuehr Oktober", "FEE-10", "0.00") in month.rows()

        # Day 2: a USD receipt the ERP books in EUR (never matched across currencies),
        # and the ERP's ledger with a document voided at the top: every row moves up.
        wrong = month.deliver(month.bank, statement(2, "INV-2;;310,00;USD", "INV-3;;99,00;EUR"))
        month.deliver(
            month.erp,
            ledger(
                "FEE-10,-4.90,2026-10-01,EUR",
                "INV-2,310.00,2026-10-02,EUR",
                "INV-3,99.00,2026-10-02,EUR",
            ),
        )
        assert month.rows() == ordered(
            [
                ("manual", "Gebuehr Oktober", "FEE-10", "0.00"),
                ("matched", "INV-3", "INV-3", "0.00"),
                ("unmatched", "INV-1", None, None),
                ("unmatched", "INV-2", None, None),
                ("unmatched", None, "INV-2", None),
            ]
        )
        shown = month.settled()
        assert shown["last_run"]["manual_work"]["carried"] == 1
        assert shown["last_run"]["manual_work"]["retired"] == 0
        moved = month.actions()
        assert moved[-1]["carried_from"] == moved[0]["id"]
        assert (moved[-1]["left_rows"], moved[-1]["right_rows"]) == ([2], [1])
        reasons = month.client.get(
            f"/api/v1/resources/{month.output}/data",
            params={"fields": "reason", "bank.Verwendungszweck": "INV-2"},
            headers=tenant.headers,
        ).json()["data"]
        assert reasons == [
            {
                "reason": "document: nearest erp row 2 (document INV-2): currency differs: "
                "USD against EUR"
            }
        ]

        # Mid-month: the bank says day 2's statement was wrong; it is taken back and the
        # corrected one delivered.
        assert month.retract(month.bank, wrong)["status"] == "retracted"
        month.deliver(month.bank, statement(2, "INV-2;;310,00;EUR", "INV-3;;99,00;EUR"))
        assert month.rows() == ordered(
            [
                ("manual", "Gebuehr Oktober", "FEE-10", "0.00"),
                ("matched", "INV-2", "INV-2", "0.00"),
                ("matched", "INV-3", "INV-3", "0.00"),
                ("unmatched", "INV-1", None, None),
            ]
        )
        kept = [a for a in month.actions() if a["undone_at"] is None]
        assert [(a["left_rows"], a["right_rows"], a["note"]) for a in kept] == [
            ([2], [1], "October's account fee")
        ]

        # Day 3: the ERP's ledger no longer holds the fee (reversed): the manual match
        # is retired, with the reason, and its rows are open again.
        month.deliver(
            month.erp, ledger("INV-2,310.00,2026-10-02,EUR", "INV-3,99.00,2026-10-02,EUR")
        )
        assert month.rows() == ordered(
            [
                ("matched", "INV-2", "INV-2", "0.00"),
                ("matched", "INV-3", "INV-3", "0.00"),
                ("unmatched", "Gebuehr Oktober", None, None),
                ("unmatched", "INV-1", None, None),
            ]
        )
        retired = month.actions()[-1]
        assert retired["undone_at"] is not None
        assert retired["retired_reason"].startswith("erp row 1 no longer in ERP ledger: file ")
        assert month.settled()["last_run"]["manual_work"]["retired"] == 1
    assert serve.terminate(timeout=20) in (0, -signal.SIGTERM)
