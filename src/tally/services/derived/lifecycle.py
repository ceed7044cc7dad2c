"""A derived resource's definition as the API and the CLI use it, the same for every
kind: created with its empty output and a first run due now, listed, shown (also with
its neighbours in the graph, for a page), its last runs listed, replaced (the output
renamed with it, a run due now) and deleted with its output (and its runs).

Each use case is one transaction. A derived resource is its record (definition, inputs
and run queue: storage/derived/records.py) plus its output, an ordinary resource of the
kind named after it: created with the definition's columns and no rows, so the Data API
reads it at once; runs (runs.py, in the workers) replace its table. Another workspace's
derived resource does not exist (the kind's 404).

A kind (reconciliation, transformation) subclasses `DefinitionLifecycle` with what is
its own: how a body parses and is checked into a `Checked` definition, how a record is
shown, and what else of its own a replacement or a deletion changes.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Self, TypeVar

from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.columns import Column
from tally.core.derived_runs import DerivedRun
from tally.core.errors import ConflictError, FieldProblem, NotFoundError
from tally.services.derived import outputs
from tally.services.derived.graph import Neighbours, neighbours
from tally.services.derived.phases import RunUnderWay
from tally.storage import accounts, resources
from tally.storage.derived import records
from tally.storage.derived import runs as run_history
from tally.storage.derived.records import DerivedRecord
from tally.storage.engine import snapshot_connection, write_connection

CHANGED_MEANWHILE = "the definition was changed meanwhile"


@dataclass(frozen=True)
class Derived:
    """A derived resource as the API and the CLI show it; a kind's subclass adds its own
    fields (`own_json`, shown after the definition)."""

    id: int
    resource_id: int  # the output
    name: str
    definition: dict[str, Any]  # canonical: every default spelled out
    state: str  # queued | running | idle | failed
    error: str | None
    last_run: dict[str, Any] | None
    run: RunUnderWay | None  # the run under way: its phase and since when

    @classmethod
    def of(cls, record: DerivedRecord, **own: Any) -> Self:
        return cls(
            record.id,
            record.resource_id,
            record.name,
            record.definition,
            record.state,
            record.error,
            record.last_run,
            RunUnderWay.of(record, utc_now()),
            **own,
        )

    def to_json(self) -> dict[str, Any]:
        """As the API and the CLI show it."""
        return {
            "id": self.id,
            "name": self.name,
            "resource_id": self.resource_id,
            "definition": self.definition,
            **self.own_json(),
            "state": self.state,
            "error": self.error,
            "run": self.run.to_json() if self.run else None,
            "last_run": self.last_run,
        }

    def own_json(self) -> dict[str, Any]:
        return {}


Body = TypeVar("Body")  # a definition's body as the kind parses it
Shown = TypeVar("Shown", bound=Derived)  # a derived resource as the kind shows it


@dataclass(frozen=True)
class Checked:
    """A definition checked against its workspace, as every kind stores it."""

    name: str  # of the derived resource and of its output
    definition: dict[str, Any]  # canonical JSON
    inputs: Sequence[int]  # the resources it reads
    columns: tuple[Column, ...]  # of its output


class DefinitionLifecycle(ABC, Generic[Body, Shown]):
    kind: ClassVar[str]  # of the derived resource, and of its output resource
    not_found: ClassVar[type[NotFoundError]]  # another workspace's, or none at all

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @abstractmethod
    def parse(self, body: Any) -> Body:
        """The body's shape, or InvalidBodyError naming each field at fault (before any
        transaction begins)."""

    @abstractmethod
    def check(
        self, conn: Connection, workspace_id: int, body: Body, *, own_output: int | None
    ) -> Checked:
        """The definition checked against the workspace, or DefinitionRejectedError
        naming every fault; `own_output` is the output of the derived resource being
        replaced (its name is its own; it and what is computed from it are no input)."""

    @abstractmethod
    def shown(self, conn: Connection, record: DerivedRecord) -> Shown:
        """The record as the API and the CLI show it."""

    def replacing(
        self, conn: Connection, record: DerivedRecord, checked: Checked, now: dt.datetime
    ) -> None:
        """What else of the kind's a new definition changes, before it is stored."""

    def replaced(
        self, conn: Connection, record: DerivedRecord, now: dt.datetime, actor: str | None
    ) -> None:
        """What else of the kind's follows a new definition stored (`record` as it is now;
        `actor`: who replaced it, for a kind that keeps a history)."""

    def deleting(self, conn: Connection, record: DerivedRecord) -> None:
        """What else of the kind's goes before its record (which it may point at)."""

    def create(self, *, workspace_id: int, body: Any) -> Shown:
        """The derived resource, its empty output and its first run, due now; a
        concurrent taker of the name is the same 400 as one the check found, a table
        that cannot be made the 502 (storage's `create_resource`)."""
        parsed = self.parse(body)
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            accounts.get_workspace(conn, workspace_id)
            checked = self.check(conn, workspace_id, parsed, own_output=None)
            output = resources.create_resource(
                conn,
                workspace_id=workspace_id,
                name=checked.name,
                kind=self.kind,
                columns=checked.columns,
                is_placeholder=False,
                folder_id=None,
                now=now,
            )
            derived_id = records.insert_derived(
                conn,
                workspace_id=workspace_id,
                resource_id=output.id,
                kind=self.kind,
                name=checked.name,
                definition=checked.definition,
                inputs=checked.inputs,
                now=now,
            )
            return self.shown(conn, self._owned(conn, workspace_id, derived_id))

    def list_defined(
        self, *, workspace_id: int, after_id: int = 0, limit: int | None = None
    ) -> list[Shown]:
        """Oldest first: those with ids above `after_id`, at most `limit` of them."""
        with self._engine.connect() as conn:
            accounts.get_workspace(conn, workspace_id)
            found = records.list_derived(
                conn, workspace_id, self.kind, after_id=after_id, limit=limit
            )
            return [self.shown(conn, r) for r in found]

    def get(self, *, workspace_id: int, derived_id: int) -> Shown:
        with self._engine.connect() as conn:
            return self.shown(conn, self._owned(conn, workspace_id, derived_id))

    def get_with_neighbours(
        self, *, workspace_id: int, derived_id: int
    ) -> tuple[Shown, Neighbours]:
        """The derived resource, what it reads and what reads its output, in one
        snapshot (a page showing the graph around it)."""
        with snapshot_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, derived_id)
            return self.shown(conn, record), neighbours(conn, record.resource_id)

    def list_runs(self, *, workspace_id: int, derived_id: int) -> list[DerivedRun]:
        """Its last runs (at most RUNS_KEPT), newest first."""
        with self._engine.connect() as conn:
            record = self._owned(conn, workspace_id, derived_id)
            return run_history.list_runs(conn, record.id)

    def replace(
        self,
        *,
        workspace_id: int,
        derived_id: int,
        body: Any,
        expected: dict[str, Any] | None = None,
        actor: str | None = None,
    ) -> Shown:
        """A new definition, run at once (the output keeps its rows and columns until
        that run publishes). `expected`: the definition the change was made to; another
        one stored meanwhile is a ConflictError (no edit silently overwrites another).
        `actor`: who (a user's name, an API key's fingerprint), for `replaced`."""
        parsed = self.parse(body)
        now = utc_now()
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, derived_id, lock=True)
            if expected is not None and record.definition != expected:
                raise ConflictError([FieldProblem(None, CHANGED_MEANWHILE)])
            checked = self.check(conn, workspace_id, parsed, own_output=record.resource_id)
            self.replacing(conn, record, checked, now)
            records.replace_definition(
                conn,
                record.id,
                name=checked.name,
                definition=checked.definition,
                inputs=checked.inputs,
                now=now,
            )
            if checked.name != record.name:
                resources.rename_resource(conn, record.resource_id, checked.name, now)
            records.request_run(conn, record.id, now)
            stored = self._owned(conn, workspace_id, record.id)
            self.replaced(conn, stored, now, actor)
            return self.shown(conn, stored)

    def delete(self, *, workspace_id: int, derived_id: int) -> None:
        """The derived resource (and what `deleting` adds), its output resource and
        table; refused (409) while another derived resource reads the output, naming
        each."""
        with write_connection(self._engine) as conn, conn.begin():
            record = self._owned(conn, workspace_id, derived_id, lock=True)
            self.deleting(conn, record)
            outputs.delete_with_output(conn, record)

    def _owned(
        self, conn: Connection, workspace_id: int, derived_id: int, *, lock: bool = False
    ) -> DerivedRecord:
        """The derived resource, if this workspace owns it; otherwise it does not exist."""
        find = records.lock_derived if lock else records.find_derived
        record = find(conn, derived_id, self.kind)
        if record is None or record.workspace_id != workspace_id:
            raise self.not_found()
        return record
