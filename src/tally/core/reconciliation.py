"""A reconciliation's definition and the words of its results, as frozen values.

Pure code: the API and the CLI turn a JSON body into a `ReconciliationDefinition`
(services/reconciliation/definitions.py checks it against the workspace's resources);
the matching engine, the runs and the output read only these values. The JSON form
(`to_json`/`from_json`) is what is stored and what GET returns, with every default
spelled out.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any


class PassType(StrEnum):
    ONE_TO_ONE = "one_to_one"
    ONE_TO_MANY = "one_to_many"  # one left row to several right rows
    MANY_TO_ONE = "many_to_one"


class Normalizer(StrEnum):
    TRIM = "trim"
    CASEFOLD = "casefold"
    COLLAPSE_SPACES = "collapse_spaces"
    STRIP_LEADING_ZEROS = "strip_leading_zeros"
    ALNUM_ONLY = "alnum_only"
    DIGITS_ONLY = "digits_only"


class MatchStatus(StrEnum):
    """An output row's `status` column."""

    MATCHED = "matched"
    MATCHED_WITH_DIFFERENCE = "matched_with_difference"
    SUGGESTED = "suggested"
    MANUAL = "manual"
    UNMATCHED = "unmatched"
    RESOLVED = "resolved"  # one side's row closed by an analyst, with no counterpart


MANUAL_PASS_NAME = "manual"  # noqa: S105 (the `pass` column of a manual match, no secret)
# The reason codes a one-sided resolution may give when the definition lists none.
DEFAULT_RESOLUTION_REASONS = ("bank_fee", "timing", "duplicate", "write_off")


class SideName(StrEnum):
    LEFT = "left"
    RIGHT = "right"


@dataclass(frozen=True)
class KeyPair:
    left: str
    right: str
    normalize: tuple[Normalizer, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "left": self.left,
            "right": self.right,
            "normalize": [str(n) for n in self.normalize],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyPair:
        return cls(
            data["left"], data["right"], tuple(Normalizer(n) for n in data.get("normalize", ()))
        )


@dataclass(frozen=True)
class MatchPass:
    name: str
    type: PassType
    keys: tuple[KeyPair, ...]
    amount_tolerance: Decimal = Decimal(0)
    date_window: tuple[int, int] = (0, 0)  # the right date minus the left, in days
    auto_confirm: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": str(self.type),
            "keys": [k.to_json() for k in self.keys],
            "amount_tolerance": str(self.amount_tolerance),
            "date_window": list(self.date_window),
            "auto_confirm": self.auto_confirm,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MatchPass:
        before, after = data.get("date_window", (0, 0))
        return cls(
            name=data["name"],
            type=PassType(data["type"]),
            keys=tuple(KeyPair.from_json(k) for k in data.get("keys", ())),
            amount_tolerance=Decimal(str(data.get("amount_tolerance", "0"))),
            date_window=(int(before), int(after)),
            auto_confirm=bool(data.get("auto_confirm", True)),
        )


@dataclass(frozen=True)
class CreditDebit:
    """An amount kept in two columns, as bank exports keep it: the signed amount is the
    credit minus the debit, an empty cell counting as zero (both empty: no amount)."""

    credit: str
    debit: str

    def to_json(self) -> dict[str, Any]:
        return {"credit": self.credit, "debit": self.debit}


def currency_code(value: str | None) -> str | None:
    """A currency value as rows are compared by it: trimmed and upper-cased (" usd" and
    "USD" are one currency); None when empty."""
    if value is None:
        return None
    return value.strip().upper() or None


@dataclass(frozen=True)
class Side:
    """One input: its name prefixes its columns in the output (`bank.amount`). `amount`
    names one signed column or a `CreditDebit` pair; `currency` a text column (rows of
    different currencies never match)."""

    name: str
    resource_id: int
    amount: str | CreditDebit | None = None
    date: str | None = None
    currency: str | None = None

    def amount_columns(self) -> tuple[str, ...]:
        """The columns the amount is read from: none, the one, or credit and debit."""
        if self.amount is None:
            return ()
        if isinstance(self.amount, CreditDebit):
            return (self.amount.credit, self.amount.debit)
        return (self.amount,)

    def to_json(self) -> dict[str, Any]:
        """The side as stored and shown; `currency` only when the side names one (a
        definition without currencies keeps the JSON it always had)."""
        amount = self.amount.to_json() if isinstance(self.amount, CreditDebit) else self.amount
        shown: dict[str, Any] = {
            "name": self.name,
            "resource_id": self.resource_id,
            "amount": amount,
            "date": self.date,
        }
        if self.currency is not None:
            shown["currency"] = self.currency
        return shown

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Side:
        amount = data.get("amount")
        if isinstance(amount, dict):
            amount = CreditDebit(amount["credit"], amount["debit"])
        return cls(
            data["name"],
            int(data["resource_id"]),
            amount,
            data.get("date"),
            data.get("currency"),
        )


@dataclass(frozen=True)
class ReconciliationDefinition:
    name: str
    left: Side
    right: Side
    passes: tuple[MatchPass, ...]
    # The codes an analyst may close a row with (a one-sided resolution), in order.
    resolution_reasons: tuple[str, ...] = DEFAULT_RESOLUTION_REASONS

    def side(self, which: SideName) -> Side:
        return self.left if which is SideName.LEFT else self.right

    @property
    def currencies(self) -> bool:
        """Whether rows are matched within their currency (both sides name one)."""
        return self.left.currency is not None and self.right.currency is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "left": self.left.to_json(),
            "right": self.right.to_json(),
            "passes": [p.to_json() for p in self.passes],
            "resolution_reasons": list(self.resolution_reasons),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReconciliationDefinition:
        return cls(
            name=data["name"],
            left=Side.from_json(data["left"]),
            right=Side.from_json(data["right"]),
            passes=tuple(MatchPass.from_json(p) for p in data["passes"]),
            resolution_reasons=tuple(data.get("resolution_reasons", DEFAULT_RESOLUTION_REASONS)),
        )


@dataclass(frozen=True)
class ManualMatch:
    """Rows an analyst matched (or a suggested match confirmed): no run takes them apart.
    `match_id` is the match's id in the output; rows are 1-based positions (`_row`)."""

    match_id: int
    left_rows: tuple[int, ...]
    right_rows: tuple[int, ...]
    note: str | None = None


@dataclass(frozen=True)
class Rejection:
    """An automatic or suggested match an analyst undid: no run pairs any of its left
    rows with any of its right rows again."""

    left_rows: tuple[int, ...]
    right_rows: tuple[int, ...]


@dataclass(frozen=True)
class Resolution:
    """Rows of one side an analyst closed with no counterpart (a bank fee, an item
    booked next period): status `resolved`, taken by no pass, with the reason code."""

    side: SideName
    rows: tuple[int, ...]
    reason: str
    note: str | None = None


@dataclass(frozen=True)
class ManualWork:
    """What runs read from the analysts' actions, in force at the run's start."""

    matches: tuple[ManualMatch, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    resolutions: tuple[Resolution, ...] = ()
