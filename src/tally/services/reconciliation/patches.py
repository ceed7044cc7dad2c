"""The published output changed at once by an analyst's action, in the action's own
transaction, so a row leaves the exceptions (`status=unmatched`) or comes back to them
without waiting for the run the action queues (which then writes what it would have
anyway): the rows' own columns (status, reason, match id, pass), their JSON text, a new
data version, and last_run's counts, amounts (signed and absolute) and oldest unmatched
dates moved alike (the run's basis keeps the dates per day, oldest.moved), so GET and
the Data API agree in between. The output is then no run's: its digest is cleared, and
the next run is full (its data version is not the one the last run left).

Only rows the output shows with the status the action expects move; any other is left
to the run (a row a late file brought, an output that runs changed meanwhile).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection

from tally.core.reconciliation import (
    MANUAL_PASS_NAME,
    MatchStatus,
    ReconciliationDefinition,
    SideName,
)
from tally.services.reconciliation import manual, oldest, reasons, totals
from tally.services.reconciliation.oldest import OLDEST
from tally.services.reconciliation.output_columns import MATCH_ID, PASS, REASON, ROW, STATUS
from tally.storage import reconciliation_actions as actions
from tally.storage import resources
from tally.storage.derived import outputs as derived_outputs
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.resources import Resource

UNMATCHED, RESOLVED = str(MatchStatus.UNMATCHED), str(MatchStatus.RESOLVED)
# Statuses last_run counts by rows per side (`unmatched_left`); the rest by matches.
ROW_COUNTED = (UNMATCHED, RESOLVED)
# In the run's basis: the output's data version last_run's figures describe once an
# action moved them (its `output_version` stays the run's, so the next run is full).
FIGURES_VERSION = "figures_version"


@dataclass(frozen=True)
class Move:
    """Rows of one side showing status `was`, given `values` (output column name ->
    value; `status` among them)."""

    side: SideName
    rows: Sequence[int]
    was: str
    values: Mapping[str, Any]

    @property
    def becomes(self) -> str:
        return str(self.values[STATUS])


def statuses(
    conn: Connection,
    output: Resource,
    definition: ReconciliationDefinition,
    side: SideName,
    rows: Sequence[int],
) -> dict[int, tuple[str, int | None]]:
    """The status and match id the output shows for each of these positions of a side
    (none for an output no run has built yet)."""
    by_name = {c.name: c for c in output.columns}
    if STATUS not in by_name:
        return {}
    return actions.statuses_at(
        conn,
        output.table_name,
        position=by_name[f"{definition.side(side).name}.{ROW}"],
        status=by_name[STATUS],
        match_id=by_name[MATCH_ID],
        rows=rows,
    )


def apply(
    conn: Connection,
    record: DerivedRecord,
    output: Resource,
    moves: Sequence[Move],
    now: dt.datetime,
    *,
    matches: int = 0,
    replayed: bool = False,
) -> bool:
    """Every move whose rows all show `was` (else none: all or nothing, so the figures
    never count half an action), `matches` more manual matches counted; whether the
    output changed. `replayed` (replay.py): rows showing what they become already (the
    output the action changed was kept) count as moved, their figures alone moved."""
    definition = ReconciliationDefinition.from_json(record.definition)
    pending: list[Move] = []
    for move in moves:
        shown = statuses(conn, output, definition, move.side, move.rows)
        at = [shown.get(r, ("",))[0] for r in move.rows]
        if replayed and move.rows and all(s in (move.was, move.becomes) for s in at):
            left = [r for r, s in zip(move.rows, at, strict=True) if s == move.was]
            pending.append(replace(move, rows=left))
        elif not move.rows or any(s != move.was for s in at):
            return False
        else:
            pending.append(move)
    by_name = {c.name: c for c in output.columns}
    for move in (m for m in pending if m.rows):
        actions.set_rows(
            conn,
            output.table_name,
            output.columns,
            position=by_name[f"{definition.side(move.side).name}.{ROW}"],
            rows=move.rows,
            was=move.was,
            values=[(by_name[name], value) for name, value in move.values.items()],
        )
    version = output.data_version  # (a replayed action's rows show it already)
    if any(m.rows for m in pending):
        version = derived_outputs.republish(conn, output, output.row_count, now)
    last = record.last_run
    if last is not None and "counts" in last:
        figures, basis = _moved(conn, definition, last, record.run_basis, moves, matches)
        if basis is not None:
            # the figures are exact at the new version only if they were at the old one
            # (not so between a run's publication and its record: the figures are the
            # run before's until then)
            was_exact = figures_version(record.run_basis) == output.data_version
            basis = {k: v for k, v in basis.items() if k != FIGURES_VERSION}
            if was_exact:
                basis[FIGURES_VERSION] = version
        derived_records.record_patched(conn, record.id, figures, basis)
    return True


def figures_version(basis: Mapping[str, Any] | None) -> int | None:
    """The output's data version at which last_run's figures are exact: the last
    action's (when it moved exact figures), else the run's own; None when unknown."""
    if basis is None:
        return None
    found = basis.get(FIGURES_VERSION, basis.get("output_version"))
    return None if found is None else int(found)


def show_match(
    conn: Connection,
    record: DerivedRecord,
    rows: Mapping[SideName, Sequence[int]],
    note: str | None,
    now: dt.datetime,
) -> bool:
    """A manual match of rows the output shows unmatched, every one: shown `manual` at
    once, each row as it stands (the run pairs them, with their difference); whether
    it was."""
    output = resources.lock_resource(conn, record.resource_id)
    return apply(conn, record, output, match_moves(rows, note), now, matches=1)


def match_moves(rows: Mapping[SideName, Sequence[int]], note: str | None) -> list[Move]:
    """A manual match's rows, from unmatched to `manual` (the run pairs them)."""
    values = {
        STATUS: str(MatchStatus.MANUAL),
        PASS: MANUAL_PASS_NAME,
        MATCH_ID: min(rows[SideName.LEFT]),
        REASON: reasons.paired_later(note),
    }
    return [Move(side, rows[side], UNMATCHED, values) for side in SideName]


def resolve_move(side: SideName, rows: Sequence[int], reason: str, note: str | None) -> Move:
    """A resolution's rows, from unmatched to `resolved`."""
    return Move(side, rows, UNMATCHED, {STATUS: RESOLVED, REASON: reasons.resolved(reason, note)})


def reopen_move(side: SideName, rows: Sequence[int], note: str | None) -> Move:
    """An undone resolution's rows, from `resolved` to unmatched (the run explains them)."""
    return Move(side, rows, RESOLVED, {STATUS: UNMATCHED, REASON: reasons.reopened(note)})


def _moved(
    conn: Connection,
    definition: ReconciliationDefinition,
    last: dict[str, Any],
    basis: dict[str, Any] | None,
    moves: Sequence[Move],
    matches: int,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """last_run with the moved rows counted and totalled where they now are, and the
    run's basis with its unmatched rows per date moved alike. A run from before
    absolute amounts, dates or the matched amounts per status were kept has none to
    move: they stay unknown until the next run (as the console says)."""
    counts = {"resolved_left": 0, "resolved_right": 0, **last["counts"]}
    counts[str(MatchStatus.MANUAL)] += matches
    has_absolute = totals.ABSOLUTE in last
    # (without absolute amounts the signed ones stand in for them, their moves dropped)
    amounts = {"amounts": last["amounts"], totals.ABSOLUTE: last.get(totals.ABSOLUTE)}
    if not has_absolute:
        amounts[totals.ABSOLUTE] = last["amounts"]
    kept = (basis or {}).get(OLDEST)
    dated = OLDEST in last and kept is not None
    shown = last.get(OLDEST)
    scale = manual.run_scale(conn, definition)
    for move in moves:
        for status, sign in ((move.was, -1), (move.becomes, 1)):
            if status in ROW_COUNTED:
                counts[f"{status}_{move.side}"] += sign * len(move.rows)
        table = manual.side_values(conn, definition, move.side, move.rows, scale)
        amounts = totals.moved(
            definition, amounts, move.side, table, source=move.was, target=move.becomes, scale=scale
        )
        if dated and UNMATCHED in (move.was, move.becomes) and move.was != move.becomes:
            way = 1 if move.becomes == UNMATCHED else -1
            shown, kept = oldest.moved(definition, kept, move.side, table.days, way)
    figures = {**last, "counts": counts, "amounts": amounts["amounts"]}
    if has_absolute:
        figures[totals.ABSOLUTE] = amounts[totals.ABSOLUTE]
    if dated:
        figures[OLDEST] = shown
        basis = {**(basis or {}), OLDEST: kept}
    return figures, basis
