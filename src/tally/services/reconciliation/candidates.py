"""Candidates explained (issue #34, point 4): for one row of a reconciliation, under each
pass, the rows of the other side that come closest, each with every condition of the
pass it meets or fails and by how much (keys equal after the normalisers? amount 0.07
apart against a tolerance of 0.05? date 4 days later against a window of -3..3?).

Read by index from what the last run left, never every row: the other side's rows
sharing the row's key under each keyed pass (the key table, one indexed column per
chain of signatures), and those nearest by amount (the output's indexed column of the
other side's amount), at most `SCANNED` of each; the values compared are read from the
output's copies of the input rows, converted by the database as a run reads them, so
every figure is exact. A row a late file brought, not reconciled yet, has none (409).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from tally.core.columns import Column
from tally.core.errors import ConflictError, FieldProblem, RowNotFoundError
from tally.core.reconciliation import (
    MatchPass,
    MatchStatus,
    PassType,
    ReconciliationDefinition,
    SideName,
    currency_code,
)
from tally.core.reconciliation_actions import ActionKind
from tally.services.reconciliation import keys as key_tables
from tally.services.reconciliation import reasons
from tally.services.reconciliation.matching import SideTable, key_columns
from tally.services.reconciliation.normalizers import normalize
from tally.services.reconciliation.output_columns import MATCH_ID, ROW, STATUS, common_scale
from tally.services.reconciliation.reading import side_columns
from tally.storage import (
    reconciliation_actions,
    reconciliation_candidates,
    reconciliation_keys,
    resources,
)
from tally.storage import reconciliation_inputs as inputs
from tally.storage.derived.records import DerivedRecord
from tally.storage.reconciliation_candidates import Shown

TOP = 10  # candidates shown per pass
SCANNED = 50  # rows read per way of finding them (a key, each side of the amount)


@dataclass(frozen=True)
class Condition:
    """One condition of a pass for the pair: `name` `keys`, `currency`, `amount`,
    `date`, `not_rejected` or `free` (in no match, or in the row's own); the figures
    where it has them (exact decimal text; days as the window counts them: the right
    date minus the left)."""

    name: str
    met: bool
    detail: str
    difference: str | None = None
    tolerance: str | None = None
    days: int | None = None
    window: tuple[int, int] | None = None


@dataclass(frozen=True)
class Candidate:
    row: int
    status: str
    match_id: int | None
    fits: bool  # every condition met
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class PassCandidates:
    name: str
    type: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class Candidates:
    side: SideName
    row: int
    status: str
    match_id: int | None
    passes: tuple[PassCandidates, ...]


@dataclass(frozen=True)
class _Rows:
    """Rows of one side as the engine compares them (keys raw, in key_columns order;
    amounts at the run's scale; days), by position; and how the output shows each."""

    index: dict[int, int]  # position -> its place in `table`
    table: SideTable
    shown: dict[int, Shown]


class _Reader:
    """The reads of one request: the output, the run's scale, each side's columns as
    the output holds them."""

    def __init__(self, conn: Connection, record: DerivedRecord) -> None:
        self.conn = conn
        self.record = record
        self.definition = ReconciliationDefinition.from_json(record.definition)
        self.output = resources.get_resource(conn, record.resource_id)
        self.inputs = {
            which: resources.get_resource(conn, self.definition.side(which).resource_id)
            for which in SideName
        }
        left, right = (self.inputs[which].columns for which in SideName)
        self.scale = common_scale(self.definition, left, right)
        self.by_name = {c.name: c for c in self.output.columns}

    def column(self, which: SideName, name: str) -> Column:
        return self.by_name[f"{self.definition.side(which).name}.{name}"]

    def rows(self, which: SideName, positions: Sequence[int]) -> _Rows:
        """These positions' rows, read from the output's copies of them."""
        shown = reconciliation_candidates.shown_at(
            self.conn,
            self.output.table_name,
            position=self.column(which, ROW),
            status=self.by_name[STATUS],
            match_id=self.by_name[MATCH_ID],
            positions=positions,
        )
        label = f"{self.definition.side(which).name}."
        copies = tuple(
            dataclasses.replace(c, name=c.name.removeprefix(label))
            for c in self.output.columns
            if c.name.startswith(label)
        )
        wanted = side_columns(
            dataclasses.replace(self.inputs[which], columns=copies), self.definition, which
        )
        ids = {shown[p].row_id: p for p in shown}
        read = inputs.read_side(
            self.conn, self.output.table_name, wanted, self.scale, row_ids=list(ids)
        )
        positions_read = [ids[i] for i in read.row_ids]
        table = SideTable(positions_read, read.keys, read.amounts, read.days)
        return _Rows({p: k for k, p in enumerate(positions_read)}, table, shown)


def candidates(conn: Connection, record: DerivedRecord, side: SideName, row: int) -> Candidates:
    """The row's candidates under each pass, best first (fewest conditions failed, then
    nearest amount, nearest date, lowest position), at most `TOP` a pass. A row not in
    its input is a RowNotFoundError; one the output does not show yet a ConflictError."""
    reader = _Reader(conn, record)
    definition = reader.definition
    count = reader.inputs[side].row_count
    if not 1 <= row <= count:
        message = f"{side} row {row} does not exist: {definition.side(side).name} has {count} rows"
        raise RowNotFoundError([FieldProblem("row", message)])
    if STATUS not in reader.by_name:  # (no run has built the output yet)
        mine = _Rows({}, SideTable.of([]), {})
    else:
        mine = reader.rows(side, [row])
    if row not in mine.index:
        message = f"{side} row {row} is not reconciled yet: the next run takes it"
        raise ConflictError([FieldProblem("row", message)])
    other = SideName.RIGHT if side is SideName.LEFT else SideName.LEFT
    theirs = reader.rows(other, _found(reader, side, mine.table))
    rejected = {
        (left, right)
        for action in reconciliation_actions.list_actions(
            conn, record.id, in_force=True, kinds=[ActionKind.REJECT]
        )
        for left in action.left_rows
        for right in action.right_rows
    }
    judge = _Judge(reader, side, mine, theirs, rejected, row)
    passes = []
    for match_pass in definition.passes:
        ranked = sorted(judge.candidate(match_pass, j) for j in theirs.index)
        passes.append(
            PassCandidates(
                match_pass.name, str(match_pass.type), tuple(c for *_, c in ranked[:TOP])
            )
        )
    own = mine.shown[row]
    return Candidates(side, row, own.status, own.match_id, tuple(passes))


def _found(reader: _Reader, side: SideName, mine: SideTable) -> list[int]:
    """The other side's positions worth judging: those sharing the row's key under a
    chain of the keyed passes (key table), and the nearest by amount (output)."""
    definition = reader.definition
    found: set[int] = set()
    right = side is SideName.LEFT
    if reconciliation_keys.exists(reader.conn, reader.output.id):
        for n, keys in enumerate(key_tables.side_keys(definition, side, mine)):
            if keys[0] is not None:
                found.update(
                    reconciliation_candidates.positions_by_key(
                        reader.conn, reader.output.id, n, keys[0], right=right, limit=SCANNED
                    )
                )
    other = SideName.RIGHT if right else SideName.LEFT
    amount = definition.side(other).amount
    own = mine.amounts[0]
    if isinstance(amount, str) and own is not None and definition.side(side).amount is not None:
        column = reader.column(other, amount)
        value = own // 10 ** (reader.scale - column.scale)  # (floor: the nearer side's start)
        found.update(
            reconciliation_candidates.nearest_positions(
                reader.conn,
                reader.output.table_name,
                position=reader.column(other, ROW),
                column=column,
                value=value,
                limit=SCANNED,
            )
        )
    return sorted(found)


Ranked = tuple[int, int, int, int, Candidate]  # failed, |amount gap|, |date gap|, row


class _Judge:
    """Every condition of a pass for the row and one candidate."""

    def __init__(
        self,
        reader: _Reader,
        side: SideName,
        mine: _Rows,
        theirs: _Rows,
        rejected: set[tuple[int, int]],
        row: int,
    ) -> None:
        self.row = row
        self.definition = reader.definition
        self.scale = reader.scale
        self.side = side
        self.mine = mine
        self.theirs = theirs
        self.rejected = rejected
        self.columns = {w: key_columns(self.definition, w) for w in SideName}

    def candidate(self, match_pass: MatchPass, j: int) -> Ranked:
        """The candidate at position j of the other side, ranked."""
        own, theirs = self.mine.index[self.row], self.theirs.index[j]
        left, right = self.mine, self.theirs
        li, ri = own, theirs
        if self.side is SideName.RIGHT:
            left, right, li, ri = right, left, ri, li
        conditions: list[Condition] = []
        if match_pass.keys:
            conditions.append(self._keys(match_pass, left.table, li, right.table, ri))
        if self.definition.currencies:
            conditions.append(self._currency(left.table, li, right.table, ri))
        gap = shift = 0
        amounts = left.table.amounts[li], right.table.amounts[ri]
        if self.definition.left.amount is not None:
            condition, gap = self._amount(match_pass, *amounts)
            conditions.append(condition)
        days = left.table.days[li], right.table.days[ri]
        if self.definition.left.date is not None:
            condition, shift = self._date(match_pass, *days)
            conditions.append(condition)
        pair = (left.table.positions[li], right.table.positions[ri])
        conditions.append(
            Condition(
                "not_rejected",
                pair not in self.rejected,
                "an analyst rejected this pair" if pair in self.rejected else "not rejected",
            )
        )
        shown, mine = self.theirs.shown[j], self.mine.shown[self.row]
        ours = shown.match_id is not None and shown.match_id == mine.match_id
        free = shown.status == MatchStatus.UNMATCHED or ours
        detail = "unmatched" if free else f"{shown.status} (match {shown.match_id})"
        if ours:
            detail = f"in this row's own match {shown.match_id}"
        elif shown.status == MatchStatus.RESOLVED:
            detail = "resolved by an analyst"
        conditions.append(Condition("free", free, detail))
        failed = sum(not c.met for c in conditions)
        found = Candidate(j, shown.status, shown.match_id, not failed, tuple(conditions))
        return failed, gap, shift, j, found

    def _keys(
        self, match_pass: MatchPass, left: SideTable, li: int, right: SideTable, ri: int
    ) -> Condition:
        parts, met = [], True
        for pair in match_pass.keys:
            a = left.keys[self.columns[SideName.LEFT].index(pair.left)][li]
            b = right.keys[self.columns[SideName.RIGHT].index(pair.right)][ri]
            x, y = normalize(a, pair.normalize), normalize(b, pair.normalize)
            equal = x is not None and x == y
            met = met and equal
            steps = f" after {', '.join(map(str, pair.normalize))}" if pair.normalize else ""
            how = "equal" if equal else "differ"
            parts.append(f"{pair.left} {_quoted(a)} and {pair.right} {_quoted(b)} {how}{steps}")
        return Condition("keys", met, "; ".join(parts))

    def _currency(self, left: SideTable, li: int, right: SideTable, ri: int) -> Condition:
        codes = [
            currency_code(table.keys[0][i]) for table, i in ((left, li), (right, ri))
        ]  # (the currency is the first key column where compared: key_columns)
        met = None not in codes and codes[0] == codes[1]
        shown = [code or "(empty)" for code in codes]
        return Condition("currency", met, f"{shown[0]} against {shown[1]}")

    def _amount(self, match_pass: MatchPass, a: int | None, b: int | None) -> tuple[Condition, int]:
        tolerance = match_pass.amount_tolerance.scaleb(self.scale)
        shown_tolerance = reasons.money(int(tolerance), self.scale)
        if a is None or b is None:
            return Condition("amount", False, "an amount is empty", tolerance=shown_tolerance), 0
        gap = a - b  # left minus right, as the output's difference
        met = abs(gap) <= tolerance
        detail = f"differs by {reasons.money(abs(gap), self.scale)}, tolerance {shown_tolerance}"
        if not gap:
            detail = "equal"
        if match_pass.type is not PassType.ONE_TO_ONE:
            detail += " (the pass compares a group's sum)"
        difference = reasons.money(gap, self.scale)
        condition = Condition("amount", met, detail, difference, shown_tolerance)
        return condition, abs(gap)

    def _date(self, match_pass: MatchPass, x: int | None, y: int | None) -> tuple[Condition, int]:
        window = match_pass.date_window
        if x is None or y is None:
            return Condition("date", False, "a date is empty", window=window), 0
        shift = y - x
        met = window[0] <= shift <= window[1]
        label = self.definition.right.name
        detail = f"{label} date {reasons.days(shift)}, {reasons.window(window)}"
        return Condition("date", met, detail, days=shift, window=window), abs(shift)


def _quoted(value: str | None) -> str:
    return "(empty)" if value is None else repr(value)
