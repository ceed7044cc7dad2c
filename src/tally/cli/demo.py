"""`tally serve --demo`: a demo account, workspace, key and sample source, ready to curl."""

from __future__ import annotations

import csv
import random
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

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

    def shell_exports(self, base_url: str) -> str:
        """For `source .tally/demo.env`: the README's curl examples read these."""
        return (
            f"export BASE={base_url} KEY={self.key} WS={self.workspace_id} "
            f"ACCOUNT={self.account_id} RID={self.resource_id}\n"
        )


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
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "payments.csv"
        _write_sample(path)
        result = runtime.catalogue.create_source_from_file(
            workspace_id=workspace.id, name=f"demo payments {workspace.id}", path=path
        )
    return Demo(account.id, workspace.id, key.key, result.resource.id)
