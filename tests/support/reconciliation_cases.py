"""Small reconciliation inputs for the engine's unit and property tests: rows written as
dicts, turned into the engine's SideRows and into the model's rows alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from support.reconciliation_model import Model, ModelMatch, ModelOutcome, ModelRow
from tally.core.reconciliation import ManualWork, ReconciliationDefinition, SideName
from tally.services.reconciliation.matching import (
    Outcome,
    SideRow,
    SideTable,
    key_columns,
    reconcile,
)

COLUMNS = ("ref", "code", "amount", "day", "note", "cur")  # every test row's columns, in order
SCALE = 2


def definition(
    passes: list[dict[str, Any]], *, amount: bool = True, date: bool = True, currency: bool = False
) -> ReconciliationDefinition:
    """Both sides read `amount`, `day` and (with `currency`) `cur`."""

    def side(name: str, resource_id: int) -> dict[str, Any]:
        named = {
            "name": name,
            "resource_id": resource_id,
            "amount": "amount" if amount else None,
            "date": "day" if date else None,
        }
        return {**named, "currency": "cur"} if currency else named

    return ReconciliationDefinition.from_json(
        {"name": "test", "left": side("bank", 1), "right": side("ledger", 2), "passes": passes}
    )


def row(
    ref: str | None = None, amount: int | None = 0, day: int | None = 0, **more: Any
) -> dict[str, Any]:
    """A test row; amounts are cents (scale 2), days are ordinals, `cur` a currency."""
    return {
        "ref": ref,
        "code": more.get("code"),
        "amount": amount,
        "day": day,
        "note": more.get("note"),
        "cur": more.get("cur"),
    }


def side_rows(
    d: ReconciliationDefinition, which: SideName, rows: Sequence[Mapping[str, Any]]
) -> list[SideRow]:
    columns = key_columns(d, which)
    return [
        SideRow(p, tuple(r.get(c) for c in columns), r["amount"], r["day"])
        for p, r in enumerate(rows, start=1)
    ]


def content(left: Sequence[Mapping[str, Any]], right: Sequence[Mapping[str, Any]]):  # type: ignore[no-untyped-def]
    def lookup(which: SideName, positions: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        rows = left if which is SideName.LEFT else right
        return {p: tuple(rows[p - 1].get(c) for c in COLUMNS) for p in positions}

    return lookup


def run_engine(
    d: ReconciliationDefinition,
    left: Sequence[Mapping[str, Any]],
    right: Sequence[Mapping[str, Any]],
    manual: ManualWork = ManualWork(),
) -> Outcome:
    return reconcile(
        d,
        SideTable.of(side_rows(d, SideName.LEFT, left)),
        SideTable.of(side_rows(d, SideName.RIGHT, right)),
        manual,
        scale=SCALE,
        content=content(left, right),
    )


def run_model(
    d: ReconciliationDefinition,
    left: Sequence[Mapping[str, Any]],
    right: Sequence[Mapping[str, Any]],
    manual: ManualWork = ManualWork(),
) -> ModelOutcome:
    return model(d, left, right, manual).run().outcome()


def model(
    d: ReconciliationDefinition,
    left: Sequence[Mapping[str, Any]],
    right: Sequence[Mapping[str, Any]],
    manual: ManualWork = ManualWork(),
) -> Model:
    """The plain model of these rows and this manual work, not run yet."""

    def model_rows(rows: Sequence[Mapping[str, Any]]) -> list[ModelRow]:
        return [
            ModelRow(p, {"cur": None, **r}, tuple(r.get(c) for c in COLUMNS))
            for p, r in enumerate(rows, start=1)
        ]

    matches = sorted(manual.matches, key=lambda m: min(m.left_rows))
    return Model(
        d,
        model_rows(left),
        model_rows(right),
        SCALE,
        [(m.left_rows, m.right_rows) for m in matches],
        [(r.left_rows, r.right_rows) for r in manual.rejections],
        (
            [p for r in manual.resolutions if r.side is SideName.LEFT for p in r.rows],
            [p for r in manual.resolutions if r.side is SideName.RIGHT for p in r.rows],
        ),
    )


def as_model(outcome: Outcome) -> ModelOutcome:
    """The engine's outcome in the model's terms (reasons aside)."""
    matches = [
        ModelMatch(m.match_id, m.status, m.pass_name, m.difference, m.left, m.right)
        for m in outcome.matches
    ]
    return (
        matches,
        set(outcome.unmatched_left),
        set(outcome.unmatched_right),
        set(outcome.resolved_left),
        set(outcome.resolved_right),
    )


def per_side(
    left: tuple[str, ...], right: tuple[str, ...], *, status: str = "matched"
) -> dict[str, Any]:
    """last_run's amounts (of one currency, where the sides name them): each side's
    (matched, unmatched[, resolved]) totals (resolved "0.00" when not given), the matched
    amount all of match status `status` (`matched_by_status`)."""
    scale = len(left[0].partition(".")[2])
    zero = f"0.{'0' * scale}" if scale else "0"

    def side(given: tuple[str, ...]) -> dict[str, Any]:
        matched, unmatched, resolved = (*given, zero, zero)[:3]
        return {
            "matched": matched,
            "unmatched": unmatched,
            "resolved": resolved,
            "matched_by_status": split(zero, **{status: matched}),
        }

    return {str(which): side(given) for which, given in zip(SideName, (left, right), strict=True)}


def split(zero: str = "0.00", **given: str) -> dict[str, str]:
    """last_run's `matched_by_status` of one side: the amounts given by status, `zero`
    for every other match status."""
    statuses = ("matched", "matched_with_difference", "suggested", "manual")
    return {status: given.get(status, zero) for status in statuses}
