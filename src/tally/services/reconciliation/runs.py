"""A reconciliation's run: both inputs read in one snapshot, matched by the engine, and
its output described for the derived runs' machinery (services/derived/runs.py), which
stages, publishes and schedules it.

The output's rows are assembled by the database: the run writes one plan row per
output row (the match's own values, the two rows' positions and row ids) and the output
table joins each to its left and right rows by row id (storage/derived/outputs.py), so
no input value travels through Python but the keys, amounts and dates the engine
compares.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from array import array
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import orjson
from sqlalchemy import Connection, Engine

from tally.core.columns import Column
from tally.core.reconciliation import (
    ManualWork,
    MatchStatus,
    ReconciliationDefinition,
    SideName,
)
from tally.services.derived.builders import Output, Patch
from tally.services.derived.phases import Steps
from tally.services.reconciliation import oldest, replay, totals
from tally.services.reconciliation.incremental import Input, basis, patch, why_full
from tally.services.reconciliation.keys import KeyTable
from tally.services.reconciliation.matching import (
    Matches,
    Outcome,
    SideTable,
    reconcile,
)
from tally.services.reconciliation.output_columns import (
    common_scale,
    open_row_indexes,
    output_columns,
)
from tally.services.reconciliation.plan import plan_rows
from tally.services.reconciliation.reading import side_columns
from tally.storage import reconciliation_actions, reconciliation_inputs, resources
from tally.storage.derived.plans import Layout, Part
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import snapshot_connection
from tally.storage.resources import Resource

# The plan's values, before the row ids of the left and right rows.
PLAN_VALUES = ("match_id", "status", "pass", "difference", "reason", "left._row", "right._row")
# Named in every full run's digest: a change to how the engine's state becomes output
# rows must change it, so that an unchanged state is not taken for an unchanged output.
DIGEST_FORMAT = "reconciliation-state/1"
# The statuses last_run counts by rows per side (`unmatched_left`...), not by matches.
ROW_STATUSES = (MatchStatus.UNMATCHED, MatchStatus.RESOLVED)

log = logging.getLogger("tally.derived")


@dataclass(frozen=True)
class _Input:
    """One side as read: its resource, its rows for the engine, their row ids."""

    resource: Resource
    rows: SideTable
    row_ids: array[int]


class ReconciliationBuilder:
    """The `Builder` of kind `reconciliation`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def build(self, record: DerivedRecord, steps: Steps) -> Output | Patch:
        """A patch of the published output when the last run is a sound base and few
        rows are new (incremental.py), else the whole output. Its snapshot's read-only
        transaction takes no lock: each step's phase is written beside it."""
        definition = ReconciliationDefinition.from_json(record.definition)
        steps.begin("read")
        with snapshot_connection(self._engine) as conn, conn.begin():
            left_resource = resources.get_resource(conn, definition.left.resource_id)
            right_resource = resources.get_resource(conn, definition.right.resource_id)
            scale = common_scale(definition, left_resource.columns, right_resource.columns)
            manual = reconciliation_actions.manual_work(conn, record.id)
            after_publish = replay.replayer(record.id, replay.in_force(conn, record.id))
            work = _manual_work(conn, record, manual)
            sides = [
                Input(which, resource, side_columns(resource, definition, which))
                for which, resource in (
                    (SideName.LEFT, left_resource),
                    (SideName.RIGHT, right_resource),
                )
            ]
            columns = output_columns(
                definition.left.name,
                definition.right.name,
                left_resource.columns,
                right_resource.columns,
                scale,
            )
            layout = _layout(columns, left_resource, right_resource)
            inputs = {
                "left": {
                    "resource_id": left_resource.id,
                    "data_version": left_resource.data_version,
                },
                "right": {
                    "resource_id": right_resource.id,
                    "data_version": right_resource.data_version,
                },
            }
            why = why_full(conn, record, definition, manual, sides)
            if why is None:
                steps.begin("incremental")
                found = patch(conn, record, definition, manual, sides, scale, layout, inputs)
                if isinstance(found, Patch):
                    found.summary["manual_work"] = work
                    return replace(found, after_publish=after_publish)
                why = found
                steps.begin("read")  # the whole of both inputs
            left, right = _read_both(self._engine, conn, sides, scale)
            steps.begin("match")
            outcome = reconcile(
                definition,
                left.rows,
                right.rows,
                manual,
                scale=scale,
                content=_content_lookup(conn, left, right),
            )
        steps.begin("digest")
        tally = _tally(outcome, columns, (inputs, record.definition))
        unmatched = (outcome.unmatched_left, outcome.unmatched_right)
        shown_oldest, kept_oldest = oldest.full(definition, (left.rows, right.rows), unmatched)
        log.info("reconciliation_full_run", extra={"derived_id": record.id, "why": why})
        return Output(
            layout=layout,
            rows=lambda: plan_rows(outcome, _by_position(left), _by_position(right)),
            row_count=tally.rows,
            digest=tally.digest,
            inputs={
                left_resource.id: left_resource.columns,
                right_resource.id: right_resource.columns,
            },
            summary={
                "inputs": inputs,
                **_summary(definition, outcome, tally, (left, right), scale),
                "oldest_unmatched": shown_oldest,
                "mode": "full",
                "rows_examined": len(left.rows) + len(right.rows),
                "manual_work": work,
            },
            basis=basis(
                record,
                manual,
                [(sides[0], *_extent(left)), (sides[1], *_extent(right))],
                oldest=kept_oldest,
            ),
            companion=KeyTable(
                record.resource_id,
                definition,
                [(left.rows, left.row_ids), (right.rows, right.row_ids)],
            ),
            after_publish=after_publish,
            indexes=open_row_indexes(definition, columns),
        )


def _extent(side: _Input) -> tuple[int, int]:
    """How many rows a side had, and its last row id (0: none)."""
    return len(side.rows), side.row_ids[-1] if side.row_ids else 0


def _by_position(side: _Input) -> array[int]:
    """The side's row ids indexed by position (1-based: index 0 unused)."""
    return array("q", [0]) + side.row_ids


def _read_both(
    engine: Engine, conn: Connection, sides: Sequence[Input], scale: int
) -> tuple[_Input, _Input]:
    """Both sides as the run's snapshot (`conn`) has them, read at once: the right side
    on a connection of its own in a thread while this one reads the left (the database
    reads with the GIL released; a 1M-row side is seconds of it). That connection's
    snapshot is used only if it has the right input at the data version `conn` saw (a
    version names its rows: an input that changed between the two is read here after)."""
    left_side, right_side = sides

    def read_right() -> _Input | None:
        with snapshot_connection(engine) as other, other.begin():
            seen = resources.get_resource(other, right_side.resource.id).data_version
            if seen != right_side.resource.data_version:
                return None
            return _read(other, right_side, scale)

    with ThreadPoolExecutor(1, thread_name_prefix="tally-read") as pool:
        reading = pool.submit(read_right)
        left = _read(conn, left_side, scale)
        right = reading.result()
    return left, right or _read(conn, right_side, scale)


def _read(conn: Connection, side: Input, scale: int) -> _Input:
    read = reconciliation_inputs.read_side(conn, side.resource.table_name, side.wanted, scale)
    positions = range(1, len(read) + 1)
    return _Input(
        side.resource, SideTable(positions, read.keys, read.amounts, read.days), read.row_ids
    )


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


@dataclass
class _Tally:
    """The output's row count and content digest, and the matches per status."""

    rows: int
    digest: str
    counts: dict[str, int]


def _manual_work(conn: Connection, record: DerivedRecord, manual: ManualWork) -> dict[str, Any]:
    """last_run's account of the manual work: the matches and rejections in force, and
    since the last run (`through`, the last change it counted), the actions carried to
    new positions and those retired because their rows are gone (a snapshot replaced,
    a file taken back)."""
    last = (record.last_run or {}).get("manual_work") or {}
    since = dt.datetime.fromisoformat(last["through"]) if last.get("through") else None
    changes = reconciliation_actions.retirements(conn, record.id, after=since)
    through = changes.through or since
    return {
        "matches": len(manual.matches),
        "rejections": len(manual.rejections),
        "carried": changes.carried,
        "retired": changes.retired,
        "through": through.isoformat() if through else None,
    }


def _tally(outcome: Outcome, columns: Sequence[Column], inputs: Any) -> _Tally:
    """Equal digests, equal outputs (its columns, the inputs' versions, hence their
    rows, and the engine's state the output rows are made of: `Matches.state`): a run
    whose digest is the published output's publishes nothing."""
    matches = outcome.matches
    if not isinstance(matches, Matches):
        raise TypeError("_tally takes an Outcome that reconcile returned")
    digest = hashlib.sha256(_serialized((DIGEST_FORMAT, [c.to_json() for c in columns], inputs)))
    for part in matches.state(outcome):
        digest.update(part if isinstance(part, bytes) else _serialized(part))
    counts = {str(status): 0 for status in MatchStatus if status not in ROW_STATUSES}
    counts.update((str(status), n) for status, n in matches.per_status().items())
    alone = sum(map(len, outcome[1:]))  # rows in no match: unmatched and resolved
    return _Tally(matches.pairs() + alone, digest.hexdigest(), counts)


def _serialized(value: Any) -> bytes:
    """Bytes that differ whenever the value does: orjson's JSON (~10x faster than
    `repr` on a million rows; a `Match` as its plain tuple), or `repr`'s text where an
    integer leaves 64 bits."""
    try:
        return orjson.dumps(value, default=tuple)
    except orjson.JSONEncodeError:
        return repr(value).encode()


def _summary(
    definition: ReconciliationDefinition,
    outcome: Outcome,
    tally: _Tally,
    sides: tuple[_Input, _Input],
    scale: int,
) -> dict[str, Any]:
    """last_run's counts (matches per status; unmatched rows per side) and amount totals
    per side (per currency, where compared), matched (in any match, and per match
    status), unmatched and resolved, as exact decimal text, signed and absolute
    (totals.py)."""
    counts: dict[str, int] = {
        **tally.counts,
        "unmatched_left": len(outcome.unmatched_left),
        "unmatched_right": len(outcome.unmatched_right),
        "resolved_left": len(outcome.resolved_left),
        "resolved_right": len(outcome.resolved_right),
    }
    tables = [side.rows for side in sides]
    placed = totals.statuses(outcome)
    return {"counts": counts, **totals.full(definition, tables, placed, scale)}
