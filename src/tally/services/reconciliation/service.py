"""Reconciliations as the API and the CLI use them: defined, listed, replaced, deleted
(the lifecycle every derived resource shares, services/derived/lifecycle.py, given a
reconciliation's checks and columns), run on request, and the analysts' manual work
(match, confirm, undo, resolve, reopen) and its history (who did what, and who changed
the definition or asked for a run).

Each use case is one transaction. The output is an ordinary resource of kind
`reconciliation` named after it. Another workspace's reconciliation does not exist
(404); every change queues a run due now.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from tally.core.clock import utc_now
from tally.core.columns import INT64_MAX
from tally.core.errors import ConflictError, FieldProblem, ReconciliationNotFoundError
from tally.core.reconciliation import ReconciliationDefinition, SideName
from tally.core.reconciliation_actions import ActionKind, ActionRecord, HistoryFilter
from tally.services.derived.lifecycle import Checked, DefinitionLifecycle, Derived
from tally.services.reconciliation import (
    candidates,
    history,
    manual,
    match_pages,
    patches,
    resolutions,
)
from tally.services.reconciliation.bodies import ReconciliationDefinitionBody, parse_definition
from tally.services.reconciliation.candidates import Candidates
from tally.services.reconciliation.history import HistoryPage
from tally.services.reconciliation.inputs import checked_definition
from tally.services.reconciliation.match_pages import MatchPage
from tally.services.reconciliation.output_columns import common_scale, output_columns
from tally.storage import reconciliation_actions as actions
from tally.storage import reconciliation_history, reconciliation_keys, resources
from tally.storage.derived import records as derived_records
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import snapshot_connection, write_connection

KIND = "reconciliation"  # of the derived resource, and of its output resource


class Reconciliation(Derived):
    """A reconciliation as the API and the CLI show it: its definition, state and last
    run (counts and amounts)."""


class ReconciliationService(DefinitionLifecycle[ReconciliationDefinitionBody, Reconciliation]):
    """The definition's lifecycle (derived/lifecycle.py: create, list_defined, get,
    replace, delete) with a reconciliation's checks and columns, and its manual work."""

    kind = KIND
    not_found = ReconciliationNotFoundError

    def parse(self, body: Any) -> ReconciliationDefinitionBody:
        return parse_definition(body)

    def check(
        self,
        conn: Connection,
        workspace_id: int,
        body: ReconciliationDefinitionBody,
        *,
        own_output: int | None,
    ) -> Checked:
        definition, readable = checked_definition(conn, workspace_id, body, own_output=own_output)
        left, right = (readable[definition.side(s).resource_id] for s in SideName)
        columns = output_columns(
            definition.left.name,
            definition.right.name,
            left,
            right,
            common_scale(definition, left, right),
        )
        inputs = (definition.left.resource_id, definition.right.resource_id)
        return Checked(definition.name, definition.to_json(), inputs, columns)

    def shown(self, conn: Connection, record: DerivedRecord) -> Reconciliation:
        """With its definition canonical (one stored before a field existed shows its
        default: `resolution_reasons`)."""
        canonical = ReconciliationDefinition.from_json(record.definition).to_json()
        return dataclasses.replace(Reconciliation.of(record), definition=canonical)

    def replacing(
        self, conn: Connection, record: DerivedRecord, checked: Checked, now: dt.datetime
    ) -> None:
        """Manual work names rows by their positions in the inputs: when a side reads
        another resource, every action is retired (kept, undone) rather than applied to
        rows nobody chose."""
        old = ReconciliationDefinition.from_json(record.definition)
        if tuple(checked.inputs) != (old.left.resource_id, old.right.resource_id):
            reason = "the definition's sides read other resources: its rows are not these"
            actions.retire_actions(conn, record.id, now, reason)

    def replaced(
        self, conn: Connection, record: DerivedRecord, now: dt.datetime, actor: str | None
    ) -> None:
        """The change kept in the history, with who made it (an action of kind `define`)."""
        manual.record_event(conn, record, ActionKind.DEFINE, now, actor)

    def deleting(self, conn: Connection, record: DerivedRecord) -> None:
        """Its actions (before the record they point at) and its key tables."""
        actions.delete_actions(conn, record.id)
        reconciliation_keys.drop_tables(conn, record.resource_id)

    def queue_run(
        self, *, workspace_id: int, reconciliation_id: int, actor: str | None = None
    ) -> Reconciliation:
        """A run due now, asked for by `actor` (kept in the history: kind `run`)."""
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id, lock=True)
            now = utc_now()
            derived_records.request_run(conn, record.id, now)
            manual.record_event(conn, record, ActionKind.RUN, now, actor)
            return Reconciliation.of(self._owned(conn, workspace_id, record.id))

    def record_operators_run(self, *, reconciliation_id: int, actor: str) -> None:
        """A run the operator asks for (`tally admin run-reconciliation`, which names no
        workspace and runs it in its own process) kept in the history as a `run`, as the
        API's; nothing for an id that is no reconciliation (the run itself says so)."""
        with write_connection(self._engine) as conn, conn.begin():
            record = derived_records.find_derived(conn, reconciliation_id, "reconciliation")
            if record is not None:
                manual.record_event(conn, record, ActionKind.RUN, utc_now(), actor)

    def match(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        left_rows: Sequence[int],
        right_rows: Sequence[int],
        note: str | None,
        actor: str | None = None,
    ) -> int:
        """A manual match of these rows (taken from any automatic match they are in);
        its match id, the smallest left row. `actor`: who (a user's name, an API key's
        fingerprint), kept with the action."""
        rows = {SideName.LEFT: left_rows, SideName.RIGHT: right_rows}
        return self._record(
            workspace_id, reconciliation_id, ActionKind.MATCH, rows, note, actor=actor
        )

    def confirm(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        match_id: int,
        note: str | None = None,
        actor: str | None = None,
    ) -> int:
        """The suggested match of the current output made manual, with the note; its
        match id."""
        with self._engine.connect() as conn:
            record = self._owned(conn, workspace_id, reconciliation_id)
            output = resources.get_resource(conn, record.resource_id)
            rows = manual.suggested_rows(manual.match_in_output(conn, output, match_id), match_id)
        return self._record(
            workspace_id,
            reconciliation_id,
            ActionKind.CONFIRM,
            rows,
            note,
            field="match_id",
            actor=actor,
        )

    def undo(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        match_id: int,
        note: str | None = None,
        actor: str | None = None,
    ) -> str:
        """A manual match dissolved (`dissolved`), or an automatic or suggested match of the
        current output rejected (`rejected`): no later run pairs its rows again. The note
        is kept with the action (manual.undo)."""
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id, lock=True)
            return manual.undo(conn, record, match_id, note, utc_now(), actor)

    def resolve(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        side: SideName,
        rows: Sequence[int],
        reason: str,
        note: str | None,
        actor: str | None = None,
    ) -> ActionRecord:
        """Rows of one side closed with a reason code and a note (status `resolved` in
        the output at once; resolutions.py); the resolution."""
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id, lock=True)
            return resolutions.resolve(conn, record, side, rows, reason, note, utc_now(), actor)

    def reopen(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        resolution_id: int,
        note: str | None = None,
        actor: str | None = None,
    ) -> ActionRecord:
        """A resolution undone (kept, with the note and who): its rows unmatched again."""
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id, lock=True)
            return resolutions.reopen(conn, record, resolution_id, note, utc_now(), actor)

    def undo_action(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        action_id: int,
        note: str | None = None,
        actor: str | None = None,
    ) -> ActionRecord:
        """An action of the history undone where the API allows it, in one transaction:
        a manual match in force dissolved (as `undo`), a resolution in force reopened (as
        `reopen`); ConflictError naming `action_id` for any other (undone meanwhile, a
        rejection, an event, none of that id). The action as it is now."""
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id, lock=True)
            found = None
            if 1 <= action_id <= INT64_MAX:
                found = actions.find_action(conn, record.id, action_id)
            if found is None or found.undone_at is not None or not found.can_undo:
                message = f"action {action_id} is not a manual match or a resolution in force"
                raise ConflictError([FieldProblem("action_id", message)])
            if found.makes_manual_match:
                manual.undo(conn, record, found.match_id or 0, note, utc_now(), actor)
            else:
                resolutions.reopen(conn, record, found.id, note, utc_now(), actor)
            return actions.find_action(conn, record.id, action_id) or found

    def candidates(
        self, *, workspace_id: int, reconciliation_id: int, side: SideName, row: int
    ) -> Candidates:
        """One row's candidates under each pass, each condition met or failed (
        candidates.py); read in one snapshot."""
        with snapshot_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id)
            return candidates.candidates(conn, record, side, row)

    def match_page(
        self,
        *,
        workspace_id: int,
        reconciliation_id: int,
        statuses: Sequence[str],
        pass_name: str | None = None,
        offset: int = 0,
        limit: int,
    ) -> MatchPage:
        """A page of the output's matches of these statuses (match_pages.py), for the
        console's workbench; read in one snapshot."""
        with snapshot_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id)
            return match_pages.match_page(
                conn, record, statuses, pass_name=pass_name, offset=offset, limit=limit
            )

    def open_rows(
        self, *, workspace_id: int, reconciliation_id: int
    ) -> tuple[int, dict[str, int]] | None:
        """The rows left open per side (`left`, `right`) as last_run counts them, and the
        output's data version those counts are exactly true of (the run's, or the last
        action's that moved them: the same transaction wrote both); None when no basis
        names it. A page of the open rows then need not count them again."""
        with self._engine.connect() as conn:
            record = self._owned(conn, workspace_id, reconciliation_id)
        version = patches.figures_version(record.run_basis)
        counts = (record.last_run or {}).get("counts")
        if version is None or counts is None:
            return None
        return version, {s: int(counts[f"unmatched_{s}"]) for s in ("left", "right")}

    def actions(self, *, workspace_id: int, reconciliation_id: int) -> list[ActionRecord]:
        """Every action taken, in order, undone ones included (and the events kept
        beside the manual work: a definition replaced, a run asked for)."""
        with self._engine.connect() as conn:
            record = self._owned(conn, workspace_id, reconciliation_id)
            return actions.list_actions(conn, record.id)

    def history(
        self, *, workspace_id: int, reconciliation_id: int, chosen: HistoryFilter, page: int
    ) -> HistoryPage:
        """A page of its history (history.py), newest first, read in one snapshot."""
        with snapshot_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id)
            return history.page_of(conn, record.id, chosen, page)

    def history_csv(
        self, *, workspace_id: int, reconciliation_id: int, chosen: HistoryFilter
    ) -> Iterator[bytes]:
        """The whole filtered history as CSV; ReconciliationNotFoundError at once, before
        anything is streamed; then read in one snapshot as the chunks are taken."""
        with self._engine.connect() as conn:
            record = self._owned(conn, workspace_id, reconciliation_id)
        definition = ReconciliationDefinition.from_json(record.definition)
        return self._history_chunks(record.id, definition, chosen)

    def _history_chunks(
        self, derived_id: int, definition: ReconciliationDefinition, chosen: HistoryFilter
    ) -> Iterator[bytes]:
        with snapshot_connection(self._engine) as conn, conn.begin():
            entries = reconciliation_history.stream_history(conn, derived_id, chosen)
            yield from history.csv_chunks(definition, entries)

    def _record(
        self,
        workspace_id: int,
        reconciliation_id: int,
        kind: ActionKind,
        rows: Mapping[SideName, Sequence[int]],
        note: str | None,
        *,
        field: str = "{side}_rows[{index}]",
        actor: str | None = None,
    ) -> int:
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, reconciliation_id, lock=True)
            definition = ReconciliationDefinition.from_json(record.definition)
            manual.check_rows(conn, record.id, definition, rows, field=field)
            if kind is ActionKind.MATCH:
                manual.check_balance(conn, definition, rows, note)
            now = utc_now()
            manual.record_action(conn, record, kind, rows, note, now, actor)
            if kind is ActionKind.MATCH:  # (rows shown unmatched leave the exceptions now)
                patches.show_match(conn, record, rows, note, now)
        return min(rows[SideName.LEFT])
