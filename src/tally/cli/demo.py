"""`tally serve --demo`: a demo account, workspace and key; a sample source and a
transformation summing it; a bank statement and a ledger reconciled against each other;
ready to curl."""

from __future__ import annotations

import csv
import random
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from tally.cli.demo_pair import BANK_ROWS, LEDGER_ROWS, definition, write_side
from tally.runtime import Runtime

SAMPLE_ROWS = 500
_COUNTERPARTIES = (
    "Acme Ltd",
    "Birch Travel S.A.",
    "Harbor Dairy S.A.",
    "Quarry Welding GmbH",
    "Valley Tutoring Ltd",
)


@dataclass(frozen=True)
class Demo:
    account_id: int
    workspace_id: int
    key: str
    resource_id: int
    bank_id: int
    ledger_id: int
    reconciliation_id: int
    reconciliation_resource_id: int  # its output
    transformation_id: int
    transformation_resource_id: int  # its output

    def shell_exports(self, base_url: str) -> str:
        """For `source .tally/demo.env`: the README's curl examples read these."""
        return (
            f"export BASE={base_url} KEY={self.key} WS={self.workspace_id} "
            f"ACCOUNT={self.account_id} RID={self.resource_id} BANK={self.bank_id} "
            f"LEDGER={self.ledger_id} REC={self.reconciliation_id} "
            f"OUT={self.reconciliation_resource_id} TRF={self.transformation_id} "
            f"TOUT={self.transformation_resource_id}\n"
        )


# The demo's transformation: what a finance team asks of a payments file first.
_SETTLED_BY_COUNTERPARTY = {
    "name": "Settled payments by counterparty",
    "sql": "SELECT p.counterparty, p.currency, SUM(p.amount) AS amount, COUNT(*) AS payments "
    "FROM p WHERE p.status = 'settled' GROUP BY p.counterparty, p.currency",
}


def _write_sample(path: Path) -> None:
    rng = random.Random(42)  # noqa: S311 - sample data, not a secret
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "txn_date", "amount", "currency", "status", "counterparty"])
        for i in range(1, SAMPLE_ROWS + 1):
            cents = rng.randint(-50_000, 2_000_000)
            writer.writerow(
                [
                    i,
                    f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    Decimal(cents).scaleb(-2),
                    rng.choice(("USD", "EUR", "GBP")),
                    rng.choice(("settled", "settled", "pending", "failed")),
                    rng.choice(_COUNTERPARTIES),
                ]
            )


def create_demo(runtime: Runtime) -> Demo:
    admin = runtime.admin
    account = admin.create_account(name="demo", allowed_origins=[])
    workspace = admin.create_workspace(account_id=account.id, name="demo", ingestion_enabled=True)
    key = admin.create_api_key(workspace.id)
    catalogue = runtime.catalogue
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        _write_sample(folder / "payments.csv")
        write_side(folder / "bank.csv", BANK_ROWS)
        write_side(folder / "ledger.csv", LEDGER_ROWS)
        payments, bank, ledger = (
            catalogue.create_source_from_file(
                workspace_id=workspace.id, name=f"demo {what} {workspace.id}", path=folder / file
            ).resource.id
            for what, file in (
                ("payments", "payments.csv"),
                ("bank", "bank.csv"),
                ("ledger", "ledger.csv"),
            )
        )
    reconciliation = runtime.reconciliations.create(
        workspace_id=workspace.id, body=definition(bank, ledger)
    )
    transformation = runtime.transformations.create(
        workspace_id=workspace.id, body=_SETTLED_BY_COUNTERPARTY | {"inputs": {"p": payments}}
    )
    # Run both now, so their outputs are there to read before the server answers.
    runtime.derived.run_now(reconciliation.id, kind="reconciliation", worker="demo")
    runtime.derived.run_now(transformation.id, kind="transformation", worker="demo")
    return Demo(
        account.id,
        workspace.id,
        key.key,
        payments,
        bank,
        ledger,
        reconciliation.id,
        reconciliation.resource_id,
        transformation.id,
        transformation.resource_id,
    )
