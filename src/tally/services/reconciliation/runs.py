"""A reconciliation's run: both inputs read in one snapshot, matched by the engine, and
its output described for the derived runs' machinery (services/derived_runs.py), which
stages, publishes and schedules it.

The output's rows are assembled by the database: the run writes one plan row per
output row (the match's own values, the two rows' positions and row ids) and the output
table joins each to its left and right rows by row id (storage/derived_outputs.py), so
no input value travels through Python but the keys, amounts and dates the engine
compares.
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.columns import Column
from tally.core.errors import RunFailedError
from tally.core.reconciliation import MatchStatus, ReconciliationDefinition, Side, SideName
from tally.services.derived_runs import Output
from tally.services.reconciliation.matching import (
    Outcome,
    SideRow,
    key_columns,
    reconcile,
)
from tally.services.reconciliation.output_columns import common_scale, output_columns
from tally.services.reconciliation.reasons import money
from tally.storage import reconciliation_actions, reconciliation_inputs, resources
from tally.storage.derived_outputs import Layout, Part
from tally.storage.derived_resources import DerivedRecord
from tally.storage.engine import snapshot_connection
from tally.storage.reconciliation_inputs import SideColumns
from tally.storage.resources import Resource

# The plan's values, before the row ids of the left and right rows.
PLAN_VALUES = ("match_id", "status", "pass", "difference", "reason", "left._row", "right._row")
DIGEST_CHUNK = 50_000  # matches hashed per update
UNMATCHED = str(MatchStatus.UNMATCHED)


@dataclass(frozen=True)
class _Input:
    """One side as read: its resource, its rows for the engine, their row ids."""

    resource: Resource
    rows: list[SideRow]
    row_ids: array[int]


class ReconciliationBuilder:
    """The `Builder` of kind `reconciliation`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def build(self, record: DerivedRecord, timings: dict[str, float]) -> Output:
        definition = ReconciliationDefinition.from_json(record.definition)
        clock = time.perf_counter()
        with snapshot_connection(self._engine) as conn, conn.begin():
            left_resource = resources.get_resource(conn, definition.left.resource_id)
            right_resource = resources.get_resource(conn, definition.right.resource_id)
            scale = common_scale(definition, left_resource.columns, right_resource.columns)
            left = _read(conn, left_resource, definition, SideName.LEFT, scale)
            right = _read(conn, right_resource, definition, SideName.RIGHT, scale)
            manual = reconciliation_actions.manual_work(conn, record.id)
            now = time.perf_counter()
            timings["read"] = now - clock
            clock = now
            outcome = reconcile(
                definition,
                left.rows,
                right.rows,
                manual,
                scale=scale,
                content=_content_lookup(conn, left, right),
            )
            timings["match"] = time.perf_counter() - clock
        columns = output_columns(
            definition.left.name,
            definition.right.name,
            left_resource.columns,
            right_resource.columns,
            scale,
        )
        layout = _layout(columns, left_resource, right_resource)
        inputs = {
            "left": {"resource_id": left_resource.id, "data_version": left_resource.data_version},
            "right": {
                "resource_id": right_resource.id,
                "data_version": right_resource.data_version,
            },
        }
        row_count = sum(len(m.left) * len(m.right) for m in outcome.matches)
        row_count += len(outcome.unmatched_left) + len(outcome.unmatched_right)
        return Output(
            layout=layout,
            rows=lambda: _plan_rows(outcome, left, right),
            row_count=row_count,
            digest=_digest(columns, inputs, outcome),
            inputs={
                left_resource.id: left_resource.columns,
                right_resource.id: right_resource.columns,
            },
            summary={"inputs": inputs, **_summary(definition, outcome, left, right, scale)},
        )


def _read(
    conn: Connection,
    resource: Resource,
    definition: ReconciliationDefinition,
    which: SideName,
    scale: int,
) -> _Input:
    side = definition.side(which)
    wanted = SideColumns(
        keys=tuple(_column(resource, side, name) for name in key_columns(definition, which)),
        amount=_column(resource, side, side.amount) if side.amount else None,
        date=_column(resource, side, side.date) if side.date else None,
    )
    rows: list[SideRow] = []
    row_ids: array[int] = array("q")
    for position, (row_id, keys, amount, day) in enumerate(
        reconciliation_inputs.read_side(conn, resource.table_name, wanted, scale), start=1
    ):
        rows.append(SideRow(position, keys, amount, day))
        row_ids.append(row_id)
    return _Input(resource, rows, row_ids)


def _column(resource: Resource, side: Side, name: str) -> Column:
    for column in resource.columns:
        if column.name == name:
            return column
    raise RunFailedError(f"{side.name}: resource {resource.id} has no column {name!r}")


def _content_lookup(conn: Connection, left: _Input, right: _Input) -> Any:
    """The engine's `ContentLookup`: rows' own values by position, read in the run's
    snapshot, only for the rows a tie needs."""

    def lookup(which: SideName, positions: Sequence[int]) -> Mapping[int, tuple[Any, ...]]:
        side = left if which is SideName.LEFT else right
        by_id = {side.row_ids[p - 1]: p for p in positions}
        found = reconciliation_inputs.read_rows(
            conn, side.resource.table_name, side.resource.columns, list(by_id)
        )
        return {by_id[row_id]: values for row_id, values in found.items()}

    return lookup


def _layout(columns: tuple[Column, ...], left: Resource, right: Resource) -> Layout:
    """Output columns in order: the plan's five match values, then each side's `_row`
    (a plan value) and its columns (from the input row the plan names)."""
    parts = [Part(value=i) for i in range(5)]
    for n, resource in enumerate((left, right)):
        parts.append(Part(value=5 + n))
        parts.extend(Part(ref=n, physical=c.physical) for c in resource.columns)
    values = (*columns[:6], columns[6 + len(left.columns)])
    return Layout(columns, tuple(parts), values, (left.table_name, right.table_name))


def _plan_rows(outcome: Outcome, left: _Input, right: _Input) -> Iterator[tuple[Any, ...]]:
    """One plan row per output row, in output order: left positions ascending (a match's
    right rows ascending within), then the right rows in no match."""
    owner = array("q", [-1]) * (len(left.rows) + 1)
    for index, match in enumerate(outcome.matches):
        for position in match.left:
            owner[position] = index
    seq = 0
    left_ids, right_ids = left.row_ids, right.row_ids
    for position in range(1, len(left.rows) + 1):
        index = owner[position]
        if index < 0:
            seq += 1
            reason = outcome.unmatched_left[position]
            yield (
                seq,
                None,
                UNMATCHED,
                None,
                None,
                reason,
                position,
                None,
                left_ids[position - 1],
                None,
            )
            continue
        m = outcome.matches[index]
        for other in m.right:
            seq += 1
            yield (
                seq,
                m.match_id,
                str(m.status),
                m.pass_name,
                m.difference,
                m.reason,
                position,
                other,
                left_ids[position - 1],
                right_ids[other - 1],
            )
    for position, reason in outcome.unmatched_right.items():
        seq += 1
        yield (
            seq,
            None,
            UNMATCHED,
            None,
            None,
            reason,
            None,
            position,
            None,
            right_ids[position - 1],
        )


def _digest(columns: Sequence[Column], inputs: dict[str, Any], outcome: Outcome) -> str:
    """The output's content: its columns, the inputs' versions (their rows), and every
    match and reason. Equal digests, equal outputs: the run publishes nothing."""
    digest = hashlib.sha256(repr(([c.to_json() for c in columns], inputs)).encode())
    matches = outcome.matches
    for start in range(0, len(matches), DIGEST_CHUNK):
        digest.update(repr([tuple(m) for m in matches[start : start + DIGEST_CHUNK]]).encode())
    digest.update(repr(list(outcome.unmatched_left.items())).encode())
    digest.update(repr(list(outcome.unmatched_right.items())).encode())
    return digest.hexdigest()


def _summary(
    definition: ReconciliationDefinition,
    outcome: Outcome,
    left: _Input,
    right: _Input,
    scale: int,
) -> dict[str, Any]:
    """last_run's counts (matches per status; unmatched rows per side) and amount
    totals per side, matched (in any match) and unmatched, as exact decimal text."""
    counts = {str(status): 0 for status in MatchStatus if status is not MatchStatus.UNMATCHED}
    matched_left = matched_right = 0
    for match in outcome.matches:
        counts[str(match.status)] += 1
        matched_left += sum(left.rows[p - 1].amount or 0 for p in match.left)
        matched_right += sum(right.rows[p - 1].amount or 0 for p in match.right)
    counts["unmatched_left"] = len(outcome.unmatched_left)
    counts["unmatched_right"] = len(outcome.unmatched_right)
    amounts: dict[str, Any] = {}
    for name, side, matched in (("left", left, matched_left), ("right", right, matched_right)):
        if definition.side(SideName(name)).amount is None:
            amounts[name] = None
            continue
        total = sum(row.amount or 0 for row in side.rows)
        amounts[name] = {
            "matched": money(matched, scale),
            "unmatched": money(total - matched, scale),
        }
    return {"counts": counts, "amounts": amounts}
