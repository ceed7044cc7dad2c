"""The analysts' actions, inside the caller's transaction: which rows are already in a
manual match, what a match of the current output holds, the fingerprint of the rows an
action names, and the actions recorded (each queues a run).

Rows are 1-based positions in their input (`bank._row`); a match's id is its smallest
left row. The output is read by its columns' places, which output_columns.py fixes:
the match's own columns, then `<left>._row` and the left columns, then `<right>._row`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence

import orjson
from sqlalchemy import Connection

from tally.core.columns import INT64_MAX
from tally.core.errors import (
    ConflictError,
    FieldProblem,
    InvalidBodyError,
    MatchNotFoundError,
    RowNotFoundError,
)
from tally.core.reconciliation import (
    MatchStatus,
    ReconciliationDefinition,
    SideName,
    currency_code,
)
from tally.core.reconciliation_actions import ActionKind
from tally.services.reconciliation import reasons
from tally.services.reconciliation.matching import SideTable
from tally.services.reconciliation.output_columns import MATCH_ID, STATUS, common_scale
from tally.services.reconciliation.reading import side_columns
from tally.storage import reconciliation_actions as actions
from tally.storage import reconciliation_inputs, resources
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.reconciliation_actions import OutputPair
from tally.storage.resource_tables import source_rows
from tally.storage.resources import Resource

LEFT_ROW_PLACE = 5  # after match_id, status, pass, difference, reason
AUTOMATIC = (MatchStatus.MATCHED, MatchStatus.MATCHED_WITH_DIFFERENCE, MatchStatus.SUGGESTED)


def check_rows(
    conn: Connection,
    derived_id: int,
    definition: ReconciliationDefinition,
    rows: Mapping[SideName, Sequence[int]],
    *,
    field: str = "{side}_rows[{index}]",
    one_currency: bool = True,
) -> None:
    """RowNotFoundError naming every row that is not in its input, else ConflictError
    naming every row in a manual match or a resolution already and, where the sides
    name currencies and `one_currency` (a match), every row when they hold two
    currencies or more (`field` names where each row was given). A row whose currency
    is empty may join a match of any currency: the analyst vouches for it."""
    taken: dict[SideName, dict[int, str]] = {SideName.LEFT: {}, SideName.RIGHT: {}}
    for action in actions.list_actions(conn, derived_id, in_force=True):
        if action.makes_manual_match:
            where = f"in manual match {action.match_id}"
        elif action.kind is ActionKind.RESOLVE:
            where = f"resolved ({action.reason}, resolution {action.id})"
        else:
            continue
        taken[SideName.LEFT].update(dict.fromkeys(action.left_rows, where))
        taken[SideName.RIGHT].update(dict.fromkeys(action.right_rows, where))
    missing, conflicts = [], []
    for side, positions in rows.items():
        named = definition.side(side)
        count = resources.get_resource(conn, named.resource_id).row_count
        for index, row in enumerate(positions):
            where = field.format(side=side, index=index)
            if not 1 <= row <= count:
                missing.append(
                    FieldProblem(
                        where, f"{side} row {row} does not exist: {named.name} has {count} rows"
                    )
                )
            elif row in taken[side]:
                conflicts.append(
                    FieldProblem(where, f"{side} row {row} is already {taken[side][row]}")
                )
    if missing:
        raise RowNotFoundError(missing)
    if one_currency:
        conflicts += _currency_conflicts(conn, definition, rows, field)
    if conflicts:
        raise ConflictError(conflicts)


def _currency_conflicts(
    conn: Connection,
    definition: ReconciliationDefinition,
    rows: Mapping[SideName, Sequence[int]],
    field: str,
) -> list[FieldProblem]:
    """Each row with a currency, when the rows hold more than one: a match's difference
    is never a sum of two currencies."""
    if not definition.currencies:
        return []
    named: list[tuple[str, SideName, int, str]] = []
    for side, positions in rows.items():
        source = resources.get_resource(conn, definition.side(side).resource_id)
        column = definition.side(side).currency
        place = next((k for k, c in enumerate(source.columns) if c.name == column), None)
        if place is None:  # (the run fails on it, saying so)
            continue
        found = actions.rows_at(
            conn, source.table_name, source.columns, positions, row_count=source.row_count
        )
        for index, row in enumerate(positions):
            code = currency_code(found[row][place]) if row in found else None
            if code is not None:
                named.append((field.format(side=side, index=index), side, row, code))
    codes = sorted({code for *_, code in named})
    if len(codes) < 2:
        return []
    return [
        FieldProblem(
            where,
            f"{side} row {row} is in {code}, the rows hold {', '.join(codes)}: a manual "
            "match holds rows of one currency (no conversion at a rate)",
        )
        for where, side, row, code in named
    ]


def match_in_output(conn: Connection, output: Resource, match_id: int) -> list[OutputPair]:
    """The current output's rows of this match; MatchNotFoundError when it has none."""
    columns = output.columns
    by_name = {c.name: c for c in columns}
    if not 1 <= match_id <= INT64_MAX or MATCH_ID not in by_name or len(columns) <= LEFT_ROW_PLACE:
        raise MatchNotFoundError()
    left_row = columns[LEFT_ROW_PLACE]
    prefix = left_row.name.removesuffix("_row")  # 'bank.'; side names hold no dot
    right_row = next(c for c in columns[LEFT_ROW_PLACE:] if not c.name.startswith(prefix))
    pairs = actions.match_in_output(
        conn,
        output.table_name,
        match_id=by_name[MATCH_ID],
        status=by_name[STATUS],
        left_row=left_row,
        right_row=right_row,
        value=match_id,
    )
    if not pairs:
        raise MatchNotFoundError()
    return pairs


def rows_of(pairs: Sequence[OutputPair]) -> dict[SideName, list[int]]:
    return {
        SideName.LEFT: sorted({p.left_row for p in pairs if p.left_row is not None}),
        SideName.RIGHT: sorted({p.right_row for p in pairs if p.right_row is not None}),
    }


def fingerprint(
    conn: Connection, definition: ReconciliationDefinition, rows: Mapping[SideName, Sequence[int]]
) -> str:
    """sha256 of the named rows' content, each side's rows in position order with their
    values in their stored form (the same on both backends): it shows later whether the
    rows an action named still hold what the analyst saw."""
    content = {}
    for side, positions in rows.items():
        if not positions:  # (a resolution's other side)
            continue
        source = resources.get_resource(conn, definition.side(side).resource_id)
        found = actions.rows_at(
            conn, source.table_name, source.columns, positions, row_count=source.row_count
        )
        content[str(side)] = [[p, list(found.get(p, ()))] for p in sorted(positions)]
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def record_event(
    conn: Connection, record: DerivedRecord, kind: ActionKind, now: dt.datetime, actor: str | None
) -> int:
    """A history event (a definition replaced, a run asked for: no rows, never in
    force) kept with who and the sha256 of the definition it concerns; its id."""
    digest = hashlib.sha256(orjson.dumps(record.definition, option=orjson.OPT_SORT_KEYS))
    return actions.insert_action(
        conn,
        derived_id=record.id,
        kind=kind,
        left_rows=[],
        right_rows=[],
        fingerprint=digest.hexdigest(),
        note=None,
        now=now,
        actor=actor,
    )


def suggested_rows(pairs: Sequence[OutputPair], match_id: int) -> dict[SideName, list[int]]:
    """The rows of a suggested match; ConflictError for a match of another status."""
    statuses = sorted({p.status for p in pairs})
    if statuses != [MatchStatus.SUGGESTED]:
        raise ConflictError(
            [
                FieldProblem(
                    "match_id",
                    f"match {match_id} is {', '.join(statuses)}: only a suggested match can "
                    "be confirmed",
                )
            ]
        )
    return rows_of(pairs)


def undo(
    conn: Connection,
    record: DerivedRecord,
    match_id: int,
    note: str | None,
    now: dt.datetime,
    actor: str | None = None,
) -> str:
    """Dissolve the manual match `match_id` (the note kept as its action's `undo_note`),
    or else reject the automatic or suggested match `match_id` of the current output
    (once, with the note: the output shows it until the next run); MatchNotFoundError
    when there is neither."""
    in_force = actions.list_actions(conn, record.id, in_force=True)
    for action in in_force:
        if action.makes_manual_match and action.match_id == match_id:
            actions.undo_action(conn, action.id, now, note, actor)
            derived_records.request_run(conn, record.id, now)
            return "dissolved"
    output = resources.get_resource(conn, record.resource_id)
    pairs = [p for p in match_in_output(conn, output, match_id) if p.status in AUTOMATIC]
    if not pairs:
        raise MatchNotFoundError()
    rows = rows_of(pairs)
    if not any(
        a.kind is ActionKind.REJECT
        and list(a.left_rows) == rows[SideName.LEFT]
        and list(a.right_rows) == rows[SideName.RIGHT]
        for a in in_force
    ):
        record_action(conn, record, ActionKind.REJECT, rows, note, now, actor)
    return "rejected"


def record_action(
    conn: Connection,
    record: DerivedRecord,
    kind: ActionKind,
    rows: Mapping[SideName, Sequence[int]],
    note: str | None,
    now: dt.datetime,
    actor: str | None = None,
    reason: str | None = None,
) -> int:
    """The action kept with its rows' fingerprint and who took it (a resolution's
    `reason` code with it), and a run queued to apply it; its id."""
    definition = ReconciliationDefinition.from_json(record.definition)
    action_id = actions.insert_action(
        conn,
        derived_id=record.id,
        kind=kind,
        left_rows=rows[SideName.LEFT],
        right_rows=rows[SideName.RIGHT],
        fingerprint=fingerprint(conn, definition, rows),
        note=note,
        now=now,
        actor=actor,
        reason=reason,
    )
    derived_records.request_run(conn, record.id, now)
    return action_id


def check_balance(
    conn: Connection,
    definition: ReconciliationDefinition,
    rows: Mapping[SideName, Sequence[int]],
    note: str | None,
) -> None:
    """InvalidBodyError naming `note` when the rows of a manual match do not balance
    (left sum minus right sum not zero) and no note says why: the difference is kept
    on the match, and the audit needs its reason. Rows without amounts, or with an
    empty one, have no difference to explain."""
    if note or definition.left.amount is None:
        return
    scale = run_scale(conn, definition)
    sums = []
    for side in SideName:
        amounts = side_values(conn, definition, side, rows[side], scale).amounts
        if None in amounts:
            return
        sums.append(sum(amounts))  # type: ignore[arg-type]
    difference = sums[0] - sums[1]
    if difference:
        raise InvalidBodyError(
            [
                FieldProblem(
                    "note",
                    f"the rows differ by {reasons.money(difference, scale)} (left minus "
                    "right): a match with a difference needs a note saying why",
                )
            ]
        )


def run_scale(conn: Connection, definition: ReconciliationDefinition) -> int:
    """The run's common scale, from the inputs' columns as they are."""
    left = resources.get_resource(conn, definition.left.resource_id)
    right = resources.get_resource(conn, definition.right.resource_id)
    return common_scale(definition, left.columns, right.columns)


def side_values(
    conn: Connection,
    definition: ReconciliationDefinition,
    side: SideName,
    rows: Sequence[int],
    scale: int,
) -> SideTable:
    """The rows' values as a run reads them (keys, amounts at the run's scale)."""
    source = resources.get_resource(conn, definition.side(side).resource_id)
    found = source_rows.rows_at(
        conn, source.table_name, source.columns, rows, row_count=source.row_count
    )
    positions = sorted(found)
    wanted = side_columns(source, definition, side)
    values = reconciliation_inputs.read_side(
        conn, source.table_name, wanted, scale, row_ids=[found[p][0] for p in positions]
    )
    return SideTable(positions, values.keys, values.amounts, values.days)
