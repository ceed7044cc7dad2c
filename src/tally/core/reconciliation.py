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


MANUAL_PASS_NAME = "manual"  # noqa: S105 (the `pass` column of a manual match, no secret)


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
class Side:
    """One input: its name prefixes its columns in the output (`bank.amount`)."""

    name: str
    resource_id: int
    amount: str | None = None
    date: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "resource_id": self.resource_id,
            "amount": self.amount,
            "date": self.date,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Side:
        return cls(data["name"], int(data["resource_id"]), data.get("amount"), data.get("date"))


@dataclass(frozen=True)
class ReconciliationDefinition:
    name: str
    left: Side
    right: Side
    passes: tuple[MatchPass, ...]

    def side(self, which: SideName) -> Side:
        return self.left if which is SideName.LEFT else self.right

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "left": self.left.to_json(),
            "right": self.right.to_json(),
            "passes": [p.to_json() for p in self.passes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReconciliationDefinition:
        return cls(
            name=data["name"],
            left=Side.from_json(data["left"]),
            right=Side.from_json(data["right"]),
            passes=tuple(MatchPass.from_json(p) for p in data["passes"]),
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
class ManualWork:
    """What runs read from the analysts' actions, in force at the run's start."""

    matches: tuple[ManualMatch, ...] = ()
    rejections: tuple[Rejection, ...] = ()
