"""Incremental runs: rows that reached an input since the last run reconciled without
reading every row, and the output exactly what a full run would give (decision 0016).

The engine decides a row by the rows sharing its keys in each pass (and, through the
rows those earlier passes took, transitively): its matches, its reason and its nearest
candidate all lie in its key groups (matching.py, explain.py). So the rows new rows can
affect are their *component*: the rows reached from them through key groups of any
signature (keys.py) and through manual matches, found by index in the key table
(storage/reconciliation_keys.py) until no new key turns up. Re-running the engine on the
component alone gives its rows exactly what a full run gives them; every other output
row stays as it is (a match's id is its smallest left position: stable). A pass without
keys makes reasons and candidates global: then, and whenever the last run is not a
sound base (`why_full`), the run is full.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from tally.core.errors import RunFailedError
from tally.core.reconciliation import ManualWork, ReconciliationDefinition, SideName
from tally.services.catalogue import SOURCE_KIND
from tally.services.derived.builders import Patch
from tally.services.reconciliation import oldest, totals
from tally.services.reconciliation.keys import chains, component, key_rows
from tally.services.reconciliation.matching import Outcome, SideTable, reconcile
from tally.services.reconciliation.output_columns import (
    DIFFERENCE,
    MATCH_ID,
    PASS,
    REASON,
    ROW,
    STATUS,
    open_row_indexes,
)
from tally.services.reconciliation.plan import plan_rows
from tally.storage import (
    reconciliation_inputs,
    reconciliation_keys,
    resources,
)
from tally.storage.derived import plans as derived_plans
from tally.storage.derived.outputs import Guard
from tally.storage.derived.plans import Layout
from tally.storage.derived.records import DerivedRecord
from tally.storage.reconciliation_inputs import SideColumns
from tally.storage.reconciliation_keys import KeyRow
from tally.storage.reconciliation_patch import Columns, OutputRows
from tally.storage.resources import Resource

# New rows, and rows re-examined, at most this share of the rows already reconciled: past
# it the component's reads by index cost about what a full run's sequential read costs.
MAX_SHARE = 0.1
UNMATCHED, RESOLVED = "unmatched", "resolved"
OLDEST = oldest.OLDEST
# What an incremental run carries from the last run's summary and adjusts.
FIGURES = ("counts", "amounts", totals.ABSOLUTE, OLDEST)


@dataclass(frozen=True)
class Input:
    """One side as the builder found it in its snapshot."""

    which: SideName
    resource: Resource
    wanted: SideColumns


def fingerprint(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def basis(
    record: DerivedRecord,
    manual: ManualWork,
    sides: Sequence[tuple[Input, int, int]],
    *,
    oldest: dict[str, Any] | None,
) -> dict[str, Any]:
    """What a run read, for the next run's `why_full`: the definition, the manual work,
    and per side its resource, columns, row count and last row id; and what the next run
    adjusts: the unmatched rows of the earliest dates (oldest.py)."""
    return {
        "definition": fingerprint(record.definition),
        "manual": fingerprint(dataclasses.asdict(manual)),
        OLDEST: oldest,
        **{
            str(side.which): {
                "resource_id": side.resource.id,
                "columns": fingerprint([c.to_json() for c in side.resource.columns]),
                "rows": rows,
                "last_row_id": last_row_id,
                "removed_version": side.resource.removed_version,
            }
            for side, rows, last_row_id in sides
        },
    }


def why_full(
    conn: Connection,
    record: DerivedRecord,
    definition: ReconciliationDefinition,
    manual: ManualWork,
    sides: Sequence[Input],
) -> str | None:
    """Why this run cannot build on the last one, or None when it can: the same
    definition and manual work, every input a source read then, with the same columns
    (no decimal widened) and no row removed since, the output and its key table as that
    run left them, and every pass keyed. (`patch` then checks each source only grew: its
    row count, kept by each load in its own transaction, is the rows read then plus
    those after the last row id read; loads of one source are serialised by its row
    lock, and row ids are never given twice, so row ids only grow.)"""
    last = record.run_basis
    if last is None or record.last_run is None or "counts" not in record.last_run:
        return "no earlier run to build on"
    if totals.ABSOLUTE not in record.last_run or OLDEST not in last:
        return "the last run kept no absolute amounts or unmatched rows per date"
    if not totals.kept_split(definition, record.last_run):
        return "the last run kept no amounts per match status"
    if any(not p.keys for p in definition.passes):
        return "a pass without keys compares rows across every key"
    if last["definition"] != fingerprint(record.definition):
        return "the definition changed"
    if last["manual"] != fingerprint(dataclasses.asdict(manual)):
        return "the manual work changed"
    for side in sides:
        seen, resource = last[str(side.which)], side.resource
        if resource.kind != SOURCE_KIND or seen["resource_id"] != resource.id:
            return f"the {side.which} input is not a source the last run read"
        if seen["columns"] != fingerprint([c.to_json() for c in resource.columns]):
            return f"the {side.which} input's columns changed"
        if seen.get("removed_version", 0) != resource.removed_version:
            return f"rows were removed from the {side.which} input (a snapshot, a file taken back)"
    output = resources.get_resource(conn, record.resource_id)
    if output.data_version != last["output_version"] or not reconciliation_keys.exists(
        conn, record.resource_id
    ):
        return "the output is not the one the last run left"
    return None


@dataclass
class _Side:
    """One side's rows for the engine: the component's earlier rows and the new ones."""

    input: Input
    old: int  # rows the last run read
    last_row_id: int
    new: SideTable
    new_ids: Sequence[int]
    # The component's earlier rows, then the new ones (set by `patch`).
    rows: SideTable = dataclasses.field(default_factory=lambda: SideTable.of([]))
    ids: dict[int, int] = dataclasses.field(default_factory=dict)  # position -> row id


def patch(
    conn: Connection,
    record: DerivedRecord,
    definition: ReconciliationDefinition,
    manual: ManualWork,
    inputs: Sequence[Input],
    scale: int,
    layout: Layout,
    summary_inputs: dict[str, Any],
) -> Patch | str:
    """The run as a patch of the published output, or why it must be full. Reads only
    the new rows, the key table by index, the component's rows by row id, and the
    output's rows of the component."""
    last = record.run_basis or {}
    sides = []
    for given in inputs:
        seen = last[str(given.which)]
        new = reconciliation_inputs.read_side(
            conn, given.resource.table_name, given.wanted, scale, after=seen["last_row_id"]
        )
        if given.resource.row_count != seen["rows"] + len(new):  # its count is the load's
            return f"rows the last run read from the {given.which} input changed"
        numbered = range(seen["rows"] + 1, seen["rows"] + len(new) + 1)
        rows = SideTable(numbered, new.keys, new.amounts, new.days)
        sides.append(_Side(given, seen["rows"], seen["last_row_id"], rows, new.row_ids))
    left, right = sides
    reconciled = left.old + right.old
    fresh = len(left.new) + len(right.new)
    if fresh > MAX_SHARE * reconciled:
        return f"{fresh} new rows, more than {MAX_SHARE:.0%} of {reconciled}"
    assert record.last_run is not None
    summary = {"inputs": summary_inputs, **{k: record.last_run[k] for k in FIGURES}}
    if not fresh:
        new_basis = basis(
            record, manual, [(s.input, s.old, s.last_row_id) for s in sides], oldest=last[OLDEST]
        )
        return Patch(
            changes=False,
            apply=_no_rows,
            digest=record.output_digest or "",
            inputs={s.input.resource.id: s.input.resource.columns for s in sides},
            summary={**summary, "mode": "incremental", "rows_examined": 0},
            basis=new_basis,
            indexes=open_row_indexes(definition, layout.columns),
        )
    late = [(side.input.which, side.new) for side in sides]
    found = component(conn, record.resource_id, definition, manual, late, MAX_SHARE * reconciled)
    if isinstance(found, str):
        return found
    _read_component(conn, sides, found, scale)
    old_rows = {s.input.which: list(s.rows.positions) for s in sides}
    for side in sides:
        side.rows += side.new
        side.ids.update(zip(side.new.positions, side.new_ids, strict=True))
    outcome = reconcile(
        definition, left.rows, right.rows, manual, scale=scale, content=_content(conn, sides)
    )
    output = resources.get_resource(conn, record.resource_id)
    before = OutputRows.read(
        conn,
        output,
        _columns(output, definition),
        old_rows[SideName.LEFT],
        old_rows[SideName.RIGHT],
    )
    first = before.max_row_id + 1
    plan = list(plan_rows(outcome, left.ids, right.ids, first))
    gone, added = _changed(before, plan, first)
    row_count = output.row_count - len(gone) + len(added)
    width = len(chains(definition))
    keys: list[KeyRow] = []
    for side in sides:
        keys += key_rows(definition, side.input.which, side.new, side.new_ids)

    def stage(engine: Engine, guard: Guard) -> None:
        derived_plans.write_plan(engine, record.resource_id, layout, added, guard)

    def apply(conn: Connection) -> int:
        before.delete(conn, gone)
        derived_plans.insert_planned(conn, record.resource_id, layout, first, first + len(added))
        reconciliation_keys.append(conn, record.resource_id, width, keys)
        return row_count

    adjusted = _adjusted(record.last_run, last[OLDEST], definition, outcome, before, sides, scale)
    if isinstance(adjusted, str):
        return adjusted
    figures, kept_oldest = adjusted
    digest = hashlib.sha256(repr((record.output_digest, summary_inputs, plan)).encode())
    examined = len(left.rows) + len(right.rows)
    new_basis = basis(
        record,
        manual,
        [
            (s.input, s.old + len(s.new), s.new_ids[-1] if s.new_ids else s.last_row_id)
            for s in sides
        ],
        oldest=kept_oldest,
    )
    return Patch(
        changes=True,
        stage=stage,
        apply=apply,
        digest=digest.hexdigest(),
        inputs={s.input.resource.id: s.input.resource.columns for s in sides},
        summary={
            **summary,
            **figures,
            "mode": "incremental",
            "rows_examined": examined,
        },
        basis=new_basis,
        indexes=open_row_indexes(definition, layout.columns),
    )


def _read_component(
    conn: Connection, sides: Sequence[_Side], found: Sequence[KeyRow], scale: int
) -> None:
    """Each side's earlier rows of the component (`found`: signed position, row id; a
    right row's position negative), read by row id into `rows` and `ids`."""
    for side in sides:
        sign = 1 if side.input.which is SideName.LEFT else -1
        positions = sorted(sign * row[0] for row in found if row[0] * sign > 0)
        ids = sorted(row[1] for row in found if row[0] * sign > 0)
        values = reconciliation_inputs.read_side(
            conn, side.input.resource.table_name, side.input.wanted, scale, row_ids=ids
        )
        if len(values) != len(positions):
            raise RunFailedError(f"the {side.input.which} input lost rows the key table names")
        side.rows = SideTable(positions, values.keys, values.amounts, values.days)
        side.ids = dict(zip(positions, ids, strict=True))


def _changed(
    before: OutputRows, plan: list[tuple[Any, ...]], first: int
) -> tuple[list[int], list[tuple[Any, ...]]]:
    """What the patch changes of the component's published rows: the row ids of those
    the run no longer makes, and its plan rows not already published (renumbered from
    `first`). A row the run makes again stays as it is, row id, text and index entries
    included: under an output's ~30 indexes, each row deleted or inserted is the
    patch's cost (a component often holds rows the late ones leave as they were)."""
    published: dict[tuple[Any, ...], list[int]] = {}
    for row_id, values in before.values.items():
        published.setdefault(values, []).append(row_id)
    added: list[tuple[Any, ...]] = []
    for row in plan:
        kept = published.get(tuple(row[1:8]))
        if kept:
            kept.pop()
        else:
            added.append((first + len(added), *row[1:]))
    gone = sorted(row_id for row_ids in published.values() for row_id in row_ids)
    return gone, added


def _no_rows(conn: Connection) -> int:
    raise AssertionError("a patch without changes is not applied")


def _content(conn: Connection, sides: Sequence[_Side]) -> Any:
    """The engine's `ContentLookup` over the rows read, by their row ids."""

    def lookup(which: SideName, positions: Sequence[int]) -> dict[int, tuple[Any, ...]]:
        side = sides[0] if which is SideName.LEFT else sides[1]
        by_id = {side.ids[p]: p for p in positions}
        resource = side.input.resource
        found = reconciliation_inputs.read_rows(
            conn, resource.table_name, resource.columns, list(by_id)
        )
        return {by_id[row_id]: values for row_id, values in found.items()}

    return lookup


def _columns(output: Resource, definition: ReconciliationDefinition) -> Columns:
    named = {c.name: c for c in output.columns}
    return Columns(
        match_id=named[MATCH_ID],
        status=named[STATUS],
        pass_name=named[PASS],
        difference=named[DIFFERENCE],
        reason=named[REASON],
        left=named[f"{definition.left.name}.{ROW}"],
        right=named[f"{definition.right.name}.{ROW}"],
    )


def _adjusted(
    last_run: dict[str, Any],
    last_oldest: dict[str, Any] | None,
    definition: ReconciliationDefinition,
    outcome: Outcome,
    before: OutputRows,
    sides: Sequence[_Side],
    scale: int,
) -> tuple[dict[str, Any], dict[str, Any] | None] | str:
    """last_run's counts, amounts and oldest unmatched dates: the component's earlier
    share taken out, its new share put in (what a full run would count: per match, per
    unmatched or resolved row; amounts per row's status, its match's for a matched row),
    and the basis's unmatched rows per date; or why the run must be full
    (oldest.adjusted)."""
    counts = {"resolved_left": 0, "resolved_right": 0, **last_run["counts"]}
    for _, status in {(r[0], r[1]) for r in before.rows if r[0] is not None}:
        counts[status] -= 1
    was: dict[SideName, dict[int, str]] = {s: {} for s in SideName}  # position -> status
    for _, status, lp, rp in before.rows:
        for which, position in ((SideName.LEFT, lp), (SideName.RIGHT, rp)):
            if position is not None:
                was[which][position] = status
    now: dict[SideName, dict[int, str]] = {s: {} for s in SideName}  # position -> status
    for match in outcome.matches:
        counts[str(match.status)] += 1
        now[SideName.LEFT].update(dict.fromkeys(match.left, str(match.status)))
        now[SideName.RIGHT].update(dict.fromkeys(match.right, str(match.status)))
    alone = {
        SideName.LEFT: (outcome.unmatched_left, outcome.resolved_left),
        SideName.RIGHT: (outcome.unmatched_right, outcome.resolved_right),
    }
    for which in SideName:
        for rows, status in zip(alone[which], (UNMATCHED, RESOLVED), strict=True):
            now[which].update(dict.fromkeys(rows, status))
            earlier = sum(1 for s in was[which].values() if s == status)
            counts[f"{status}_{which}"] += len(rows) - earlier
    moved = [(side.input.which, side.rows, side.old + 1) for side in sides]
    was_unmatched = {w: {p for p, s in was[w].items() if s == UNMATCHED} for w in SideName}
    now_unmatched = {which: alone[which][0] for which in SideName}
    found = oldest.adjusted(definition, last_oldest, moved, was_unmatched, now_unmatched)
    if isinstance(found, str):
        return found
    amounts = totals.adjusted(definition, last_run, moved, was, now, scale)
    return {"counts": counts, **amounts, OLDEST: found[0]}, found[1]
